package doctest

import (
	"testing"

	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

// Each document's blocks mostly wait (a bounded wait, a release in a
// second, a provisioner): more documents at once than there are cores.
func TestMain(m *testing.M) { testrun.Main(m, testrun.Parallel(8)) }
