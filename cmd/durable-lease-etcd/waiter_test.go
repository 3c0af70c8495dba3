package main_test

import (
	"bytes"
	"fmt"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
)

// TestPoolRequestGrantedByItsWaiter: pool request on an etcd:// store is
// handed to durable-lease-etcd, which starts the request's detached waiter
// as itself ("durable-lease-etcd pool waiter ...", not "... waiter",
// which nothing serves), and the waiter grants the request once the slot
// is given back.
func TestPoolRequestGrantedByItsWaiter(t *testing.T) {
	if testing.Short() {
		testrun.Skip(t, "-short (builds the CLIs and starts etcd)")
	}
	t.Parallel()
	bin := installed(t)
	c := etcdtest.Start(t)
	env := []string{"PATH=/usr/bin:/bin", "LEASE_STORE=" + c.URL("waiter"), "POOL_POLL_MS=100",
		// No waiter outlives the test for long, whatever happens.
		"POOL_WAITER_TIMEOUT_MS=20000"}
	poolFile := filepath.Join(t.TempDir(), "pool.json")
	if err := os.WriteFile(poolFile, []byte(`{"name":"p","slots":[{"id":1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	pool := filepath.Join(bin, "pool")
	h := run(t, env, pool, "acquire", "--pool", poolFile, "--owner", "holder", "--no-wait")
	if h.code != 0 {
		t.Fatalf("acquire: exit %d %s %s", h.code, h.stdout, h.stderr)
	}
	q := run(t, env, pool, "request", "--pool", poolFile, "--owner", "agent")
	id, _ := q.out["requestId"].(string)
	pid, _ := q.out["waiterPid"].(float64)
	if q.code != 0 || q.out["queued"] != true || id == "" || pid <= 0 {
		t.Fatalf("request: exit %d %s %s", q.code, q.stdout, q.stderr)
	}
	if runtime.GOOS == "linux" {
		// The waiter is this very executable, serving pool.
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", int(pid)))
		if err != nil {
			t.Fatalf("the waiter (pid %d) is gone at once: %v", int(pid), err)
		}
		argv := bytes.Split(bytes.TrimSuffix(cmdline, []byte{0}), []byte{0})
		if len(argv) < 3 || filepath.Base(string(argv[0])) != "durable-lease-etcd" || string(argv[1]) != "pool" || string(argv[2]) != "waiter" {
			t.Errorf("the waiter runs %q, want durable-lease-etcd pool waiter ...", argv)
		}
		exe, err1 := os.Stat(fmt.Sprintf("/proc/%d/exe", int(pid)))
		want, err2 := os.Stat(filepath.Join(bin, "durable-lease-etcd"))
		if err1 == nil && err2 == nil && !os.SameFile(exe, want) {
			t.Errorf("the waiter is not the durable-lease-etcd pool handed the request to")
		}
	}
	if r := run(t, env, pool, "release", "--pool", poolFile, "--owner", "holder", "--slot", "1", "--token", fmt.Sprint(h.out["token"])); r.code != 0 {
		t.Fatalf("release: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		cl := run(t, env, pool, "claim", "--pool", poolFile, "--request", id, "--owner", "agent")
		if cl.code == 0 && cl.out["state"] == "ready" {
			if cl.out["slot"] != float64(1) || cl.out["mode"] != "async" || cl.out["token"] == nil {
				t.Fatalf("claim: %s", cl.stdout)
			}
			break
		}
		if cl.code != 0 || cl.out["queued"] != true || time.Now().After(deadline) {
			t.Fatalf("the waiter did not grant request %s within 10s: claim exit %d %s %s", id, cl.code, cl.stdout, cl.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
