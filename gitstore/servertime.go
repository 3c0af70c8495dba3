package gitstore

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// RuleServerDate is the [lease.Liveness.Rule] of a record judged by the
// server's Date header (smart HTTP).
const RuleServerDate = "server-date"

// serverTime is what one read learned of the server's clock: date, the
// latest Date header of its replies (zero when there was none: not
// HTTP, or a server or proxy that sends none), and at, the local time
// just before its first request. The server's clock was behind date+1s
// at at (whole seconds; the reply came after the request).
type serverTime struct {
	date, at time.Time
}

func (s serverTime) known() bool { return !s.date.IsZero() }

// clockServer is the content of a lease commit's clock entry when its
// record's times are the server's (PROTOCOL §10.6).
const clockServer = "server\n"

// imfFixdate is the form of every HTTP Date a server sends (RFC 9110
// §5.6.7; net/http's TimeFormat, which the store does not link: it keeps
// net out of durable-lease-git).
const imfFixdate = "Mon, 02 Jan 2006 15:04:05 GMT"

// maxTrace bounds what is read of git's HTTP trace (headers only).
const maxTrace = 1 << 20

// gitDated is git with args, like [Backend.git], that also returns the
// latest Date header of the replies when the remote is smart HTTP. The
// trace git writes for it (GIT_TRACE_CURL, headers only, credentials
// redacted by git) goes to a pipe of its own, is read for Date lines
// alone and is never printed.
func (b *Backend) gitDated(parent context.Context, args ...string) ([]byte, time.Time, error) {
	if !b.loc.HTTP {
		out, err := b.git(parent, nil, args...)
		return out, time.Time{}, err
	}
	ctx, cancel := context.WithTimeout(parent, b.timeout)
	defer cancel()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, time.Time{}, err
	}
	defer r.Close()
	cmd := b.command(ctx, args...)
	cmd.ExtraFiles = []*os.File{w} // fd 3
	cmd.Env = append(cmd.Env, "GIT_TRACE_CURL=3", "GIT_TRACE_CURL_NO_DATA=1", "GIT_TRACE_REDACT=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, time.Time{}, err
	}
	w.Close()
	dates := make(chan time.Time, 1)
	go func() {
		d := latestDate(io.LimitReader(r, maxTrace))
		_, _ = io.Copy(io.Discard, r) // past the bound: never block the writer
		dates <- d
	}()
	err = cmd.Wait()
	// The helper that wrote the trace has exited with git; what it wrote
	// is in the pipe. A process git left running (a credential cache
	// daemon) may still hold the pipe open, so the read ends soon after
	// instead of at the end of the pipe.
	_ = r.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	date := <-dates
	if err != nil {
		return out.Bytes(), date, &gitError{args: args[0], stderr: redact(errb.String()), timeout: ctx.Err() != nil, cut: parent.Err() != nil, bound: b.timeout, err: err}
	}
	return out.Bytes(), date, nil
}

// latestDate is the latest Date header in a GIT_TRACE_CURL trace
// ("... <= Recv header: Date: Thu, 03 Dec 2026 11:58:00 GMT") of a reply
// to a request for the repository. The reply to a proxy's CONNECT is the
// proxy's, not the server's, and its Date is skipped: a proxy whose clock
// runs ahead would otherwise hasten every takeover.
func latestDate(r io.Reader) time.Time {
	var latest time.Time
	connect := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		if _, req, ok := strings.Cut(line, "=> Send header: "); ok {
			// A request line starts each request: "GET /… HTTP/1.1",
			// "CONNECT host:443 HTTP/1.1"; other sent headers leave the
			// state as it is.
			if method, rest, ok := strings.Cut(req, " "); ok && strings.Contains(rest, " HTTP/") && method == strings.ToUpper(method) {
				connect = method == "CONNECT"
			}
			continue
		}
		_, h, ok := strings.Cut(line, "<= Recv header: ")
		if !ok || connect {
			continue
		}
		name, value, ok := strings.Cut(h, ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "date") {
			continue
		}
		if d, err := time.Parse(imfFixdate, strings.TrimSpace(value)); err == nil && d.After(latest) {
			latest = d
		}
	}
	return latest
}

// stampServer sets r's heartbeat (and with acquired its acquisition) to
// the server's time srv, so that its expiry (heartbeat + TTL) is on the
// server's clock: a contender reading over HTTP judges it by the Date of
// its own read.
func stampServer(r *lease.Record, srv serverTime, acquired bool) {
	r.Heartbeat = srv.date
	if acquired {
		r.AcquiredAt = srv.date
	}
	r.Boot = nil
}
