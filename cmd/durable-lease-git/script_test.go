package main_test

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/durable-lease/durable-lease/internal/testkit/clitest"
)

// TestScripts runs the scripts of testdata/script, what users type on a
// git+… store, with the installed executables first on PATH: lease, pool
// and pool-run hand those command lines to durable-lease-git beside them,
// as installed. The harness is internal/testkit/clitest's (exits, json, onejson).
func TestScripts(t *testing.T) {
	bin := installed(t)
	clitest.PoisonEnv(t)
	p := clitest.Params("testdata/script")
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		env.Setenv("PATH", bin+string(os.PathListSeparator)+env.Getenv("PATH"))
		return nil
	}
	testscript.Run(t, p)
}
