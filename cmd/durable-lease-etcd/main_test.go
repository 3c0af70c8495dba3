package main_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/testkit/testrun"

	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
)

func TestMain(m *testing.M) { testrun.Main(m, testrun.Parallel(8)) }

// installed returns the directory of the executables the tests run, all
// of them, built as the README installs them, once for the whole go test
// run (see testrun.Commands).
func installed(t *testing.T) string {
	t.Helper()
	return testrun.Commands(t, "")
}

type result struct {
	code   int
	out    map[string]any
	stdout string
	stderr string
}

func run(t *testing.T, env []string, bin string, args ...string) result {
	t.Helper()
	r := runQuiet(env, bin, args...)
	if r.code == -1 {
		t.Fatalf("%s: %s", bin, r.stderr)
	}
	return r
}

// TestCLIsHandEtcdStoresOff: lease and pool-run, given an etcd:// store,
// hand the command line to durable-lease-etcd beside them, and the
// leases live on the cluster; without that executable the URL is a usage
// error; an unreachable cluster is exit 3 within the documented bound;
// pools and pool-run --pool keep their state on the cluster too.
func TestCLIsHandEtcdStoresOff(t *testing.T) {
	if testing.Short() {
		testrun.Skip(t, "-short (builds the CLIs and starts etcd)")
	}
	t.Parallel()
	bin := installed(t)
	c := etcdtest.Start(t)
	url := c.URL("handoff")
	lease := filepath.Join(bin, "lease")
	noPath := []string{"PATH=/usr/bin:/bin"}

	a := run(t, noPath, lease, "acquire", "--kind", "baton", "--owner", "agent-1", "--ttl", "1", "--store", url)
	if a.code != 0 || a.out["fence"] == nil {
		t.Fatalf("acquire on etcd: exit %d %s %s", a.code, a.stdout, a.stderr)
	}
	rec := a.out["record"].(map[string]any)
	b := run(t, append(noPath, "LEASE_STORE="+url), lease, "acquire", "--kind", "baton", "--owner", "agent-2", "--ttl", "1")
	if b.code != 1 || b.out["code"] != "held" || b.out["holder"] != "agent-1" {
		t.Fatalf("second acquire: exit %d %s", b.code, b.stdout)
	}
	l := run(t, noPath, lease, "list", "--store", url)
	if l.code != 0 || l.out["store"] != url {
		t.Fatalf("list: exit %d %s", l.code, l.stdout)
	}
	r := run(t, noPath, lease, "release", "--kind", "baton", "--owner", "agent-1", "--token", rec["token"].(string), "--store", url)
	if r.code != 0 || r.out["released"] != true {
		t.Fatalf("release: exit %d %s", r.code, r.stdout)
	}

	// pool-run holds a baton on etcd for its command, with the fence.
	pr := run(t, noPath, filepath.Join(bin, "pool-run"), "--kind", "deploy", "--owner", "agent-1", "--ttl", "1", "--store", url, "--", "sh", "-c", `echo "fence=$POOL_RUN_FENCE"`)
	f, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(pr.stdout), "fence="))
	if pr.code != 0 || err != nil || f <= 0 {
		t.Fatalf("pool-run on etcd: exit %d %q %s", pr.code, pr.stdout, pr.stderr)
	}

	// A pool on etcd: acquire a slot (the grant carries its fence), see it
	// in status with the state's place, release it.
	poolFile := filepath.Join(t.TempDir(), "pool.json")
	if err := os.WriteFile(poolFile, []byte(`{"name":"p","slots":[{"id":1},{"id":2}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	g := run(t, noPath, filepath.Join(bin, "pool"), "acquire", "--pool", poolFile, "--store", url, "--owner", "agent-1", "--no-wait")
	if g.code != 0 || g.out["ok"] != true || g.out["slot"] != float64(1) || g.out["fence"] == nil {
		t.Fatalf("pool acquire on etcd: exit %d %s %s", g.code, g.stdout, g.stderr)
	}
	st := run(t, noPath, filepath.Join(bin, "pool"), "status", "--pool", poolFile, "--store", url)
	if st.code != 0 || !strings.HasPrefix(fmt.Sprint(st.out["poolDir"]), url+"/pool/p") || !strings.Contains(st.stdout, `"held"`) {
		t.Fatalf("pool status on etcd: exit %d %s %s", st.code, st.stdout, st.stderr)
	}
	rel := run(t, noPath, filepath.Join(bin, "pool"), "release", "--pool", poolFile, "--store", url, "--owner", "agent-1",
		"--slot", "1", "--token", fmt.Sprint(g.out["token"]))
	if rel.code != 0 || rel.out["released"] != true {
		t.Fatalf("pool release on etcd: exit %d %s %s", rel.code, rel.stdout, rel.stderr)
	}
	// pool-run on a pool on etcd: a slot for the command, released after.
	pr = run(t, noPath, filepath.Join(bin, "pool-run"), "--pool", poolFile, "--owner", "agent-2", "--store", url, "--",
		"sh", "-c", `echo "slot=$POOL_RUN_SLOT fence=$POOL_RUN_FENCE"`)
	if pr.code != 0 || !regexp.MustCompile(`^slot=1 fence=[1-9][0-9]*\n$`).MatchString(pr.stdout) {
		t.Fatalf("pool-run --pool on etcd: exit %d %q %s", pr.code, pr.stdout, pr.stderr)
	}
	st = run(t, noPath, filepath.Join(bin, "pool"), "status", "--pool", poolFile, "--store", url)
	if st.code != 0 || strings.Contains(st.stdout, `"held"`) {
		t.Fatalf("pool status after pool-run: exit %d %s", st.code, st.stdout)
	}

	// Without durable-lease-etcd beside it or on PATH: a usage error.
	alone := t.TempDir()
	if err := os.Link(lease, filepath.Join(alone, "lease")); err != nil {
		data, _ := os.ReadFile(lease)
		_ = os.WriteFile(filepath.Join(alone, "lease"), data, 0o755)
	}
	u := run(t, noPath, filepath.Join(alone, "lease"), "status", "--kind", "baton", "--store", url)
	if u.code != 2 || u.out["code"] != "usage" || !strings.Contains(u.stdout, "durable-lease-etcd") {
		t.Fatalf("without the helper: exit %d %s", u.code, u.stdout)
	}

	// An unreachable cluster: exit 3, code unavailable, within the bound.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	start := time.Now()
	d := run(t, noPath, lease, "status", "--kind", "baton", "--store", "etcd://"+dead+"/x")
	if d.code != 3 || d.out["code"] != "unavailable" || time.Since(start) > 15*time.Second {
		t.Fatalf("unreachable: exit %d after %v: %s", d.code, time.Since(start), d.stdout)
	}
}

// TestPoolLastSlotRace: processes, each its own etcd client, race with
// pool acquire --no-wait for the last free slot of a pool on etcd:
// exactly one gets it, the others are refused as saturated (exit 1), and
// nobody is left in the queue.
func TestPoolLastSlotRace(t *testing.T) {
	if testing.Short() {
		testrun.Skip(t, "-short (builds the CLIs and starts etcd)")
	}
	t.Parallel()
	bin := installed(t)
	c := etcdtest.Start(t)
	env := []string{"PATH=/usr/bin:/bin", "LEASE_STORE=" + c.URL("race")}
	poolFile := filepath.Join(t.TempDir(), "pool.json")
	if err := os.WriteFile(poolFile, []byte(`{"name":"dbs","slots":[{"id":"a"},{"id":"b"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	pool := filepath.Join(bin, "pool")
	if r := run(t, env, pool, "acquire", "--pool", poolFile, "--owner", "first", "--no-wait"); r.code != 0 {
		t.Fatalf("first acquire: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	const n = 12
	results := make(chan result, n)
	for i := 0; i < n; i++ {
		go func() {
			results <- runQuiet(env, pool, "acquire", "--pool", poolFile, "--owner", fmt.Sprintf("racer-%d", i), "--no-wait")
		}()
	}
	won := 0
	for i := 0; i < n; i++ {
		r := <-results
		switch {
		case r.code == 0 && r.out["slot"] == "b":
			won++
		case r.code == 1 && r.out["code"] == "saturated":
		default:
			t.Errorf("racer: exit %d %s %s", r.code, r.stdout, r.stderr)
		}
	}
	if won != 1 {
		t.Fatalf("%d racers won the last slot, want exactly 1", won)
	}
	st := run(t, env, pool, "status", "--pool", poolFile)
	if q, _ := st.out["queue"].([]any); st.code != 0 || len(q) != 0 {
		t.Fatalf("status after the race: exit %d %s", st.code, st.stdout)
	}
}

// TestLeaseReadsItsOwnCommandLines: lease prints its help and reports
// its mistakes itself; it runs nothing for them, even with a
// durable-lease-etcd beside it (a fake one here, that would leave a mark).
func TestLeaseReadsItsOwnCommandLines(t *testing.T) {
	if testing.Short() {
		testrun.Skip(t, "-short (builds the CLIs)")
	}
	t.Parallel()
	bin := t.TempDir()
	data, err := os.ReadFile(filepath.Join(installed(t), "lease"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "lease"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	if err := os.WriteFile(filepath.Join(bin, "durable-lease-etcd"), []byte("#!/bin/sh\ntouch "+marker+"\nexit 9\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=/usr/bin:/bin", "LEASE_STORE=" + t.TempDir()}
	lease := filepath.Join(bin, "lease")
	for _, args := range [][]string{{"--help"}, {"help"}, {"help", "acquire"}, {"acquire", "--kind", "k", "--help"}} {
		r := run(t, env, lease, args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "Usage: lease ") {
			t.Errorf("lease %q: exit %d %q %s", args, r.code, r.stdout, r.stderr)
		}
	}
	for args, want := range map[string]string{
		"acquire --kind k":                       "missing flags: --owner=OWNER, --ttl=MINUTES",
		"acquire --kind k --kind k --owner o":    "--kind is given twice: give each flag once",
		"status --kind k --bogus":                "unknown flag --bogus",
		"acquire --kind k --owner o --ttl soon":  `--ttl: expected a number but got "soon"`,
		"release --kind k --owner o --token t x": "unexpected argument x",
	} {
		r := run(t, env, lease, strings.Fields(args)...)
		if r.code != 2 || r.out["code"] != "usage" || r.out["error"] != want || !strings.HasPrefix(r.stderr, "lease: "+want+"\n") {
			t.Errorf("lease %s: exit %d %s %s, want the usage error %q", args, r.code, r.stdout, r.stderr, want)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("lease ran the durable-lease-etcd beside it for help or a mistake")
	}
}
