package doctest

import (
	"os"
	"sync"
	"testing"

	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

// Each document's blocks mostly wait (a bounded wait, a release in a
// second, a provisioner): more documents at once than there are cores.
func TestMain(m *testing.M) {
	code := testrun.Run(m, testrun.Parallel(8))
	if installed.bin != "" {
		os.RemoveAll(installed.bin)
	}
	os.Exit(code)
}

// installed is the one install of the commands that the tests running
// documents share (the README's go install), made by the first to ask.
var installed struct {
	sync.Mutex
	bin string
	s   *session
}

// installedSession is a session with the commands installed from the
// checkout as the README installs them (newSession), once per binary.
func installedSession(t *testing.T) *session {
	t.Helper()
	installed.Lock()
	defer installed.Unlock() // also when newSession fails the test
	if installed.s == nil {
		if installed.bin == "" {
			dir, err := os.MkdirTemp("", "doctest-bin-")
			if err != nil {
				t.Fatal(err)
			}
			installed.bin = dir
		}
		installed.s = newSession(t, installed.bin)
	}
	return installed.s
}
