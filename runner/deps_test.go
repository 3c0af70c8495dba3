package runner

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoCLIDependencies: runner is a library; how a run is told to people
// (JSON, codes and statuses of the CLIs, progress lines, flag parsing) is
// the commands' business. It must not link their packages, directly or
// through another package.
func TestNoCLIDependencies(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH to list the dependencies with")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const module = "github.com/durable-lease/durable-lease/"
	forbidden := []string{
		module + "internal/cli/poolcodes",
		module + "internal/cli/progress",
		module + "internal/cli/outcome",
		module + "internal/cli/cliparse",
		module + "internal/cli/pooltop",
		"github.com/alecthomas/kong",
	}
	for _, dep := range strings.Fields(string(out)) {
		bad := strings.HasPrefix(dep, module+"cmd/") || strings.HasSuffix(dep, "cli")
		for _, f := range forbidden {
			bad = bad || dep == f || strings.HasPrefix(dep, f+"/")
		}
		if bad {
			t.Errorf("runner links %s", dep)
		}
	}
}
