// Package etcd_test runs the CLI testscripts of internal/testkit/clitest on an
// etcd store, when DL_TEST_BACKEND=etcd. It is a package of its own so
// that the etcd client and server stay out of the directory-store suite.
//
// The scripts run the CLIs as users do: lease, pool and pool-run are built
// (CGO_ENABLED=0, as the README installs them) with durable-lease-etcd
// into one directory put first on the scripts' PATH, so every command line
// on an etcd:// store is handed to durable-lease-etcd, and what it starts
// of itself (a request's detached waiter, pool-run's guardian) is that
// executable too.
package etcd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
	"github.com/durable-lease/durable-lease/internal/testkit/clitest"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// backendEnv chooses the store the scripts run on: "etcd" runs them here,
// on one etcd (embedded, or etcdtest.EnvBinary's); anything else skips
// TestScripts.
const backendEnv = "DL_TEST_BACKEND"

// scripts are those that run on etcd (store_* are about directory
// stores and store URLs, cli_* about --version and --help: nothing of
// an etcd store).
var scripts = []string{"lease_*.txtar", "pool_*.txtar", "poolrun_*.txtar"}

// installed are the executables the scripts run; pool top's
// durable-lease-top is not among them (no script has a terminal for it),
// though it is built with them.
var installed = []string{"lease", "pool", "pool-run", "durable-lease-etcd"}

// TestScripts runs the scripts on one etcd, each script on a prefix of its
// own in LEASE_STORE (which the scripts set only under [!etcd]), with the
// condition etcd true and the installed executables first on PATH.
func TestMain(m *testing.M) { testrun.Main(m) }

func TestScripts(t *testing.T) {
	if os.Getenv(backendEnv) != "etcd" {
		testrun.Skip(t, "the scripts on etcd: set %s=etcd", backendEnv)
	}
	bin := install(t)
	clitest.PoisonEnv(t)
	c := etcdtest.Start(t)
	p := clitest.Params("")
	for _, pattern := range scripts {
		files, err := filepath.Glob(filepath.Join("../../../../testdata/script", pattern))
		if err != nil {
			t.Fatal(err)
		}
		p.Files = append(p.Files, files...)
	}
	setup, cond := p.Setup, p.Condition
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		env.Setenv("PATH", bin+string(os.PathListSeparator)+env.Getenv("PATH"))
		name := strings.TrimPrefix(filepath.Base(env.WorkDir), "script-")
		env.Setenv("LEASE_STORE", c.URL("script/"+name))
		return nil
	}
	p.Cmds["snapshot"] = cmdSnapshot
	p.Condition = func(s string) (bool, error) {
		if s == "etcd" {
			return true, nil
		}
		return cond(s)
	}
	testscript.Run(t, p)
}

// install returns the directory of the installed executables, built as
// the README installs them (CGO_ENABLED=0) once for the whole go test
// run, and without the race detector even under go test -race: with it
// every CLI call costs about half a second (the etcd client's start-up,
// twice instrumented by a hand-off), and the suite some minutes.
func install(t *testing.T) string {
	t.Helper()
	bin := testrun.Commands(t, "")
	for _, name := range installed {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("the build of ./cmd/... made no %s: %v", name, err)
		}
	}
	return bin
}

// cmdSnapshot writes what the script's etcd prefix holds as the directory
// store would hold it, under $WORK/store (replacing what was there): each
// lease record as <kind>.json, the journal as reaped.log, and each pool's
// queue.json, stats.json, grants/<id>.json, pool.log and nudges.jsonl. The
// scripts' assertions on files then check the keys; the layout is
// docs/PROTOCOL.md §8's.
func cmdSnapshot(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: snapshot")
	}
	loc, err := etcdstore.ParseURL(ts.Getenv("LEASE_STORE"))
	ts.Check(err)
	cli, err := clientv3.New(clientv3.Config{Endpoints: loc.Endpoints, DialTimeout: 5 * time.Second})
	ts.Check(err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, loc.Prefix+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	ts.Check(err)
	root := ts.MkAbs("store")
	ts.Check(os.RemoveAll(root))
	files := map[string]*bytes.Buffer{}
	queues := map[string][]json.RawMessage{}
	add := func(name string, data []byte) {
		if files[name] == nil {
			files[name] = &bytes.Buffer{}
		}
		files[name].Write(data)
	}
	for _, kv := range resp.Kvs {
		parts := strings.Split(strings.TrimPrefix(string(kv.Key), loc.Prefix+"/"), "/")
		switch {
		case len(parts) == 3 && parts[0] == "lease" && parts[2] == "record":
			add(parts[1]+".json", kv.Value)
		case len(parts) == 2 && parts[0] == "journal":
			add("reaped.log", append(kv.Value, '\n'))
		case len(parts) >= 3 && parts[0] == "pool":
			name := parts[1]
			if _, ok := queues[name]; !ok {
				queues[name] = []json.RawMessage{}
			}
			switch {
			case len(parts) == 3 && parts[2] == "stats":
				add(name+"/stats.json", kv.Value)
			case len(parts) == 4 && parts[2] == "queue":
				queues[name] = append(queues[name], kv.Value)
			case len(parts) == 4 && parts[2] == "grants":
				add(name+"/grants/"+parts[3]+".json", kv.Value)
			case len(parts) == 4 && parts[2] == "log":
				add(name+"/pool.log", append(kv.Value, '\n'))
			case len(parts) == 4 && parts[2] == "nudges":
				add(name+"/nudges.jsonl", append(kv.Value, '\n'))
			}
		}
	}
	for name, entries := range queues {
		data, err := json.MarshalIndent(map[string]any{"entries": entries}, "", "  ")
		ts.Check(err)
		add(name+"/queue.json", append(data, '\n'))
	}
	for name, buf := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		ts.Check(os.MkdirAll(filepath.Dir(path), 0o755))
		ts.Check(os.WriteFile(path, buf.Bytes(), 0o644))
	}
}
