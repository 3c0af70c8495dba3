package testslot_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"github.com/durable-lease/durable-lease/pool/testslot"
)

func TestMain(m *testing.M) { testrun.Main(m) }

// TestTwoPackages runs go test on two packages at once (testdata/twodbs:
// orders and billing), each of whose TestMain holds a slot of a pool of
// two databases with Main: each package's tests get a database of their
// own, and hold it while the other's do, and both slots are free after.
func TestTwoPackages(t *testing.T) {
	goTool := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			testrun.Missing(t, "the go command is not on PATH")
		}
	}
	store, together := t.TempDir(), t.TempDir()
	cmd := exec.Command(goTool, "test", "-count=1", "-p", "2", "-v", "./testdata/twodbs/orders", "./testdata/twodbs/billing")
	cmd.Env = append(os.Environ(), "LEASE_STORE="+store, "TESTSLOT_TOGETHER="+together, testrun.HostRegistryEnv())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test: %v\n%s", err, out)
	}
	got := regexp.MustCompile(`(?m)^(orders|billing): slot (\d), (\S+)$`).FindAllStringSubmatch(string(out), -1)
	if len(got) != 2 {
		t.Fatalf("want a line from each package, got %q\n%s", got, out)
	}
	slots := []string{got[0][2] + " " + got[0][3], got[1][2] + " " + got[1][3]}
	slices.Sort(slots)
	if want := []string{"1 postgresql://localhost:5432/app_test_1", "2 postgresql://localhost:5432/app_test_2"}; !slices.Equal(slots, want) {
		t.Errorf("the packages held %q, want one slot each: %q\n%s", slots, want, out)
	}
	// Both slots were given back.
	files, _ := filepath.Glob(filepath.Join(store, "*.json"))
	for _, f := range files {
		if data, _ := os.ReadFile(f); regexp.MustCompile(`"owner": *"gotest@`).Match(data) {
			t.Errorf("%s is still held: %s", f, data)
		}
	}
}

// TestOptionsRefuseBeforeTaking: an option that refuses its input makes
// Main return 3 before it reads the pool file or runs a test.
func TestOptionsRefuseBeforeTaking(t *testing.T) {
	for name, opt := range map[string]testslot.Option{
		"empty owner": testslot.WithOwner(""),
		"no wait":     testslot.WithWait(0),
	} {
		t.Run(name, func(t *testing.T) {
			ran := false
			if got := testslot.Main(runFunc(func() int { ran = true; return 0 }), "no-such-pool.json", opt); got != 3 || ran {
				t.Fatalf("Main = %d (tests ran: %v), want 3 and no test run", got, ran)
			}
		})
	}
}

type runFunc func() int

func (f runFunc) Run() int { return f() }
