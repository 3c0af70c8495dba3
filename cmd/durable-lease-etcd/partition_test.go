package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
	"github.com/durable-lease/durable-lease/internal/sys/procgroup"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"github.com/durable-lease/durable-lease/lease"
)

// TestPoolRunCutOff: pool-run holding a baton through a proxy that is then
// cut (a partition) ends its work with exit 75 before the server expires
// the lease, and so before a `lease acquire --wait-ms` on a client of its
// own takes the lease over; the work's process group is gone by then.
func TestPoolRunCutOff(t *testing.T) {
	if testing.Short() {
		testrun.Skip(t, "-short (builds the CLIs and starts etcd)")
	}
	t.Parallel()
	bin := installed(t)
	c := etcdtest.Start(t)
	p := etcdtest.NewProxy(t, c.Members[0].Endpoint)
	const kind = "deploy"
	// Six seconds, the whole seconds etcd grants at the shortest TTL
	// pool-run keeps (5.43 s: a renewal may be late by a leader election);
	// pool-run gives up a second and a half (max(TTL/4, 1 s)) before the
	// expiry it last had confirmed.
	ttl := strconv.FormatFloat(6.0/60, 'g', -1, 64)
	noPath := []string{"PATH=/usr/bin:/bin"}
	expired := etcdtest.WatchDelete(t, c.Client(), "/x/lease/"+kind+"/live")

	// The work writes its process group and its fence, then sleeps.
	workFile := filepath.Join(t.TempDir(), "work")
	pr := exec.Command(filepath.Join(bin, "pool-run"), "--kind", kind, "--owner", "runner-1", "--ttl", ttl,
		"--store", "etcd://"+p.Endpoint()+"/x", "--",
		"sh", "-c", `echo "$$ $POOL_RUN_FENCE" >"$0.tmp" && mv "$0.tmp" "$0"; sleep 60`, workFile)
	pr.Env = append(os.Environ(), noPath...)
	var prOut, prErr bytes.Buffer
	pr.Stdout, pr.Stderr = &prOut, &prErr
	if err := pr.Start(); err != nil {
		t.Fatal(err)
	}
	prExited := make(chan time.Time, 1)
	go func() {
		_ = pr.Wait()
		prExited <- time.Now()
	}()
	t.Cleanup(func() {
		_ = pr.Process.Kill()
	})

	var pgid int
	var fence int64
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if data, err := os.ReadFile(workFile); err == nil {
			f := strings.Fields(string(data))
			if len(f) != 2 {
				t.Fatalf("the work wrote %q", data)
			}
			pgid, _ = strconv.Atoi(f[0])
			fence, _ = strconv.ParseInt(f[1], 10, 64)
			break
		}
		select {
		case <-prExited:
			t.Fatalf("pool-run exited before its work ran: %s %s", prOut.String(), prErr.String())
		default:
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("the work did not start: %s", prErr.String())
		}
	}
	t.Cleanup(func() { _ = procgroup.New(pgid).Signal(syscall.SIGKILL) })
	time.Sleep(time.Second) // a few renewals
	cutAt := time.Now()
	p.Cut()

	// Another client waits for the baton, directly on the cluster.
	type took struct {
		exitedAt time.Time
		r        result
	}
	taken := make(chan took, 1)
	go func() {
		r := runQuiet(noPath, filepath.Join(bin, "lease"), "acquire", "--kind", kind, "--owner", "runner-2",
			"--ttl", ttl, "--wait-ms", "20000", "--store", c.URL("x"))
		taken <- took{time.Now(), r}
	}()

	var prExitAt, expiryAt time.Time
	var tk took
	deadline := time.After(25 * time.Second)
	for prExitAt.IsZero() || expiryAt.IsZero() || tk.exitedAt.IsZero() {
		select {
		case prExitAt = <-prExited:
		case expiryAt = <-expired:
		case tk = <-taken:
		case <-deadline:
			t.Fatalf("after the cut: pool-run exited %v, server expiry %v, other acquired %v; pool-run: %s",
				!prExitAt.IsZero(), !expiryAt.IsZero(), !tk.exitedAt.IsZero(), prErr.String())
		}
	}
	groupGone := !procgroup.Alive(pgid)

	if tk.r.code != 0 {
		t.Fatalf("the other client's acquire: exit %d %s %s", tk.r.code, tk.r.stdout, tk.r.stderr)
	}
	rec, _ := tk.r.out["record"].(map[string]any)
	acqStamp, _ := rec["acquiredAt"].(string)
	acquiredAt, err := lease.ParseTime(acqStamp)
	if err != nil {
		t.Fatalf("the other client's record: %v: %s", err, tk.r.stdout)
	}
	since := func(at time.Time) time.Duration { return at.Sub(cutAt).Round(time.Millisecond) }
	t.Logf("after the cut: pool-run exited %s, server's expiry %s, other client's acquisition %s (acquiredAt; its process exited %s)",
		since(prExitAt), since(expiryAt), since(acquiredAt), since(tk.exitedAt))

	if code := pr.ProcessState.ExitCode(); code != 75 {
		t.Errorf("pool-run exit %d; want 75\n%s", code, prErr.String())
	}
	if !strings.Contains(prErr.String(), "lost") {
		t.Errorf("pool-run's stderr does not report the loss: %s", prErr.String())
	}
	if !prExitAt.Before(expiryAt) {
		t.Errorf("pool-run exited %s after the server's expiry", prExitAt.Sub(expiryAt))
	}
	if !prExitAt.Before(acquiredAt) {
		t.Errorf("pool-run exited %s after the other client's acquisition", prExitAt.Sub(acquiredAt))
	}
	if !groupGone {
		t.Errorf("the work's process group %d is still alive after pool-run exited", pgid)
	}
	if f, _ := tk.r.out["fence"].(float64); fence <= 0 || int64(f) <= fence {
		t.Errorf("the other client's fence %v; want more than pool-run's %d", tk.r.out["fence"], fence)
	}
	if prev, _ := tk.r.out["previous"].(map[string]any); tk.r.out["tookOverExpired"] != true || prev["owner"] != "runner-1" {
		t.Errorf("the other client's acquire was no takeover of pool-run's lease: %s", tk.r.stdout)
	}
}

// runQuiet is run for a goroutine: it reports a failure to start as exit -1.
func runQuiet(env []string, bin string, args ...string) result {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		r.code, r.stderr = -1, err.Error()
	}
	_ = json.Unmarshal(stdout.Bytes(), &r.out)
	return r
}
