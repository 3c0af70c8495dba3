// Package etcd_test runs the CLI testscripts of internal/clitest on an
// embedded etcd, when DL_TEST_BACKEND=etcd. It is a package of its own so
// that the etcd client and server, and the start-up time they cost every
// CLI process, stay out of the directory-store suite.
package etcd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
	"github.com/durable-lease/durable-lease/internal/clitest"
	"github.com/durable-lease/durable-lease/internal/storeopen"
)

// backendEnv chooses the store the scripts run on: "etcd" runs them here,
// on one embedded etcd; anything else skips TestScripts.
const backendEnv = "DL_TEST_BACKEND"

// scripts are those that run on etcd: pools do not run there yet (pool
// refuses a store that is not a directory).
var scripts = []string{"lease_*.txtar", "poolrun_*.txtar"}

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
	p.Condition = func(s string) (bool, error) {
		if s == "etcd" {
			return true, nil
		}
		return cond(s)
	}
	testscript.Run(t, p)
}
