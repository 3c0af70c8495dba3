package clitest

import (
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

func TestMain(m *testing.M) {
	testscript.Main(testrun.Wrap(m, testrun.Parallel(8)), Commands)
}

// TestScripts runs every script on the directory store. The same scripts
// (those the etcd backend serves) run on etcd in ./etcd, with
// DL_TEST_BACKEND=etcd.
func TestScripts(t *testing.T) {
	PoisonEnv(t)
	testscript.Run(t, Params("../../../testdata/script"))
}
