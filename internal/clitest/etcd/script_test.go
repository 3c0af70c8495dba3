// Package etcd_test runs the CLI testscripts of internal/clitest on an
// embedded etcd, when DL_TEST_BACKEND=etcd. It is a package of its own so
// that the etcd client and server, and the start-up time they cost every
// CLI process, stay out of the directory-store suite.
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
	"github.com/durable-lease/durable-lease/internal/clitest"
	"github.com/durable-lease/durable-lease/internal/storeopen"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// backendEnv chooses the store the scripts run on: "etcd" runs them here,
// on one embedded etcd; anything else skips TestScripts.
const backendEnv = "DL_TEST_BACKEND"

// scripts are those that run on etcd (the hooks' scripts need git and
// the hook managers, and test nothing of the store).
var scripts = []string{"lease_*.txtar", "pool_*.txtar", "poolrun_*.txtar"}

func TestMain(m *testing.M) {
	// The CLI processes (this test binary, re-executed) open etcd://
	// stores themselves, as cmd/durable-lease-etcd does, instead of handing
	// them to durable-lease-etcd.
	storeopen.Register(etcdstore.Scheme, etcdstore.OpenStore)
	testscript.Main(m, clitest.Commands)
}

// TestScripts runs the scripts on one embedded etcd, each script on a
// prefix of its own in LEASE_STORE (which the scripts set only under
// [!etcd]), with the condition etcd true.
func TestScripts(t *testing.T) {
	if os.Getenv(backendEnv) != "etcd" {
		t.Skipf("the scripts run on etcd with %s=etcd", backendEnv)
	}
	clitest.PoisonEnv(t)
	c := etcdtest.Start(t)
	p := clitest.Params("")
	for _, pattern := range scripts {
		files, err := filepath.Glob(filepath.Join("../../../testdata/script", pattern))
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
