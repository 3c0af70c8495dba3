package gitstore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// fullDepth is git's way of saying "the whole history" to fetch --depth.
const fullDepth = 2147483647

// scratchRef is where ref is fetched to in the scratch repository.
func scratchRef(ref string) string { return "refs/scratch/" + strings.TrimPrefix(ref, "refs/") }

// fetch reads refs from the remote into the scratch repository, their tip
// commits only (a lease's ref is a chain of one commit per write, and
// none of it but the tip matters), in one call. Refs the remote does not
// have are left out of what it fetched. It holds b.fetchMu, with which
// the caller reads what it fetched.
func (b *Backend) fetch(ctx context.Context, depth int, refs ...string) (map[string]bool, time.Time, error) {
	have := map[string]bool{}
	want := slices.Clone(refs)
	var latest time.Time
	for len(want) > 0 {
		args := []string{"fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--depth=" + strconv.Itoa(depth), "--", b.loc.Remote}
		for _, r := range want {
			args = append(args, "+"+r+":"+scratchRef(r))
		}
		_, date, err := b.gitDated(ctx, args...)
		for n := 1; retryable(err) && n <= maxRetries; n++ {
			if werr := backoff(ctx, n); werr != nil {
				return nil, time.Time{}, b.unreachable("read "+strings.Join(refs, " "), err)
			}
			_, date, err = b.gitDated(ctx, args...)
		}
		if date.After(latest) {
			latest = date // a refusal's replies are the server's too
		}
		if err == nil {
			for _, r := range want {
				have[r] = true
			}
			return have, latest, nil
		}
		// git stops at the first ref the remote lacks, and names it.
		var ge *gitError
		if !errors.As(err, &ge) || ge.timeout {
			return nil, time.Time{}, b.unreachable("read "+strings.Join(refs, " "), err)
		}
		_, missing, found := strings.Cut(ge.stderr, "couldn't find remote ref ")
		missing, _, _ = strings.Cut(missing, "\n")
		missing = strings.TrimSpace(missing)
		i := slices.Index(want, missing)
		if !found || i < 0 {
			return nil, time.Time{}, b.unreachable("read "+strings.Join(refs, " "), err)
		}
		want = slices.Delete(want, i, i+1)
	}
	return have, latest, nil
}

// object is what git cat-file --batch said of one name: its id and type
// ("" when missing), and its content unless it was larger than max.
type object struct {
	id, typ string
	data    []byte
	size    int64
}

// query is a name for git cat-file and the most of its content to read.
type query struct {
	name string
	max  int64
}

// catFile looks qs up in the scratch repository with one git cat-file
// --batch, reading at most each query's max bytes of its object into
// memory (a larger one is skipped, its size reported).
func (b *Backend) catFile(parent context.Context, qs ...query) ([]object, error) {
	ctx, cancel := context.WithTimeout(parent, b.timeout)
	defer cancel()
	cmd := b.command(ctx, "cat-file", "--batch")
	var in strings.Builder
	for _, q := range qs {
		in.WriteString(q.name + "\n")
	}
	cmd.Stdin = strings.NewReader(in.String())
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	objs, perr := readBatch(bufio.NewReader(stdout), qs)
	if perr != nil {
		_ = cmd.Process.Kill()
	}
	werr := cmd.Wait()
	if perr == nil && werr != nil {
		perr = &gitError{args: "cat-file", stderr: redact(errb.String()), timeout: ctx.Err() != nil, cut: parent.Err() != nil, bound: b.timeout, err: werr}
	}
	return objs, perr
}

// readBatch parses the replies of git cat-file --batch to qs.
func readBatch(r *bufio.Reader, qs []query) ([]object, error) {
	objs := make([]object, 0, len(qs))
	for _, q := range qs {
		max := q.max
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("git cat-file: %w", err)
		}
		f := strings.Fields(line)
		if len(f) == 2 && f[1] == "missing" || len(f) == 2 && f[1] == "ambiguous" {
			objs = append(objs, object{})
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("git cat-file: unexpected reply %q", line)
		}
		o := object{id: f[0], typ: f[1]}
		if o.size, err = strconv.ParseInt(f[2], 10, 64); err != nil || o.size < 0 {
			return nil, fmt.Errorf("git cat-file: unexpected reply %q", line)
		}
		if o.size <= max {
			o.data = make([]byte, o.size)
			if _, err := io.ReadFull(r, o.data); err != nil {
				return nil, fmt.Errorf("git cat-file: %w", err)
			}
		} else if _, err := io.CopyN(io.Discard, r, o.size); err != nil {
			return nil, fmt.Errorf("git cat-file: %w", err)
		}
		if c, err := r.ReadByte(); err != nil || c != '\n' {
			return nil, fmt.Errorf("git cat-file: reply not terminated")
		}
		objs = append(objs, o)
	}
	return objs, nil
}
