package testclock

import (
	"encoding/json"
	"errors"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// suiteNow is the instant the tests below fix: the Node suite's lease clock.
const (
	suiteNow   = "1000000000000"
	suiteStamp = "2001-09-09T01:46:40.000Z"
)

// build returns a directory of the commands built with the given build
// tags ("" for a release build), once for the whole go test run (see
// testrun.Commands).
func build(t *testing.T, tags string) string {
	t.Helper()
	return testrun.Commands(t, tags)
}

func TestMain(m *testing.M) { testrun.Main(m) }

// run runs bin with args and extra environment, and returns its stdout
// and exit status.
func run(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	out, code, err := execute(bin, env, args...)
	if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return out, code
}

// execute is run without a *testing.T, for a goroutine.
func execute(bin string, env []string, args ...string) (string, int, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "LEASE_STORE=", "LEASE_OWNER_PATTERN=", "LEASE_POOL_FILE="), env...)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode(), nil
	}
	return string(out), 0, err
}

func decode(t *testing.T, text string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("not one JSON object: %v: %q", err, text)
	}
	return v
}

// stampsOf runs a lease acquire and a pool acquire on a new store with
// DL_TEST_NOW_MS set, and returns the times they wrote: the lease's
// heartbeat, the grant's grantedAt, the slot lease's heartbeat and the
// queue lock's and pool journal's stamps.
func stampsOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	store := t.TempDir()
	poolFile := filepath.Join(t.TempDir(), "pool.json")
	if err := os.WriteFile(poolFile, []byte(`{"slots":[{"id":1}]}`), 0o666); err != nil {
		t.Fatal(err)
	}
	env := []string{EnvVar + "=" + suiteNow}
	out, code := run(t, filepath.Join(dir, "lease"), env, "acquire", "--store", store, "--kind", "k", "--owner", "a", "--ttl", "1")
	if code != 0 {
		t.Fatalf("lease acquire exited %d: %s", code, out)
	}
	got := map[string]string{"lease heartbeat": decode(t, out)["record"].(map[string]any)["heartbeat"].(string)}
	out, code = run(t, filepath.Join(dir, "pool"), env, "acquire", "--store", store, "--pool", poolFile, "--owner", "a", "--no-wait")
	if code != 0 {
		t.Fatalf("pool acquire exited %d: %s", code, out)
	}
	got["grantedAt"] = decode(t, out)["grantedAt"].(string)
	rec, err := os.ReadFile(filepath.Join(store, "slot-1.json"))
	if err != nil {
		t.Fatal(err)
	}
	got["slot heartbeat"] = decode(t, string(rec))["heartbeat"].(string)
	log, err := os.ReadFile(filepath.Join(store, "pool", "pool.log"))
	if err != nil {
		t.Fatal(err)
	}
	got["pool.log"] = decode(t, strings.SplitN(string(log), "\n", 2)[0])["at"].(string)
	return got
}

// A release build ignores DL_TEST_NOW_MS: every time it writes is the wall
// clock's. A build with the tag dltestclock writes the fixed instant
// everywhere, lease and pool alike, and says so in --version.
func TestOnlyATestBuildHonoursTheClock(t *testing.T) {
	if testing.Short() {
		testrun.Skip(t, "-short (builds the commands twice)")
	}
	release, test := build(t, ""), build(t, "dltestclock")

	before := time.Now().Add(-time.Minute)
	for what, stamp := range stampsOf(t, release) {
		at, err := time.Parse(time.RFC3339, stamp)
		if err != nil || at.Before(before) || at.After(time.Now().Add(time.Minute)) {
			t.Errorf("release build: %s = %s, want the wall clock's time", what, stamp)
		}
	}
	for what, stamp := range stampsOf(t, test) {
		if stamp != suiteStamp {
			t.Errorf("test build: %s = %s, want %s", what, stamp, suiteStamp)
		}
	}

	if out, _ := run(t, filepath.Join(release, "lease"), nil, "--version"); strings.Contains(out, "dltestclock") {
		t.Errorf("release build --version = %q, mentions the test tag", out)
	}
	if out, _ := run(t, filepath.Join(test, "lease"), nil, "--version"); !strings.HasSuffix(strings.TrimSpace(out), ", tags dltestclock") {
		t.Errorf("test build --version = %q, want it to name the tag", out)
	}
	// A value that is not an instant is refused by a test build (a run
	// must not fall back to the wall clock unnoticed) and ignored by a
	// release build.
	bad := []string{EnvVar + "=soon"}
	store := t.TempDir()
	if out, code := run(t, filepath.Join(test, "lease"), bad, "status", "--store", store, "--kind", "k"); code != 2 || decode(t, out)["code"] != "usage" {
		t.Errorf("test build with %s=soon: exit %d, %s; want a usage error", EnvVar, code, out)
	}
	if out, code := run(t, filepath.Join(release, "lease"), bad, "status", "--store", store, "--kind", "k"); code != 0 {
		t.Errorf("release build with %s=soon: exit %d, %s; want it ignored", EnvVar, code, out)
	}
}

// plantGuard leaves the guard of kind k in store as a process of another
// implementation would after dying inside it: a directory without a holder
// file (judged by its age alone), modified at mtime.
func plantGuard(t *testing.T, store string, mtime time.Time) string {
	t.Helper()
	guard := filepath.Join(store, ".guard-k")
	if err := os.MkdirAll(guard, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(guard, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	return guard
}

// The test clock moves what records say and how they are judged, never
// how old a guard directory is: that is its mtime against the wall clock.
// A clock in the past does not make an abandoned guard look fresh, and a
// clock in the future does not make a fresh one look abandoned.
func TestGuardAgeIsJudgedByTheWallClock(t *testing.T) {
	if testing.Short() {
		testrun.Skip(t, "-short (builds the commands)")
	}
	lease := filepath.Join(build(t, "dltestclock"), "lease")
	acquire := func(store string) []string {
		return []string{"acquire", "--store", store, "--kind", "k", "--owner", "a", "--ttl", "1"}
	}

	t.Run("an abandoned guard under a clock in the past", func(t *testing.T) {
		store := t.TempDir()
		plantGuard(t, store, time.Now().Add(-2*time.Minute))
		out, code := run(t, lease, []string{EnvVar + "=" + suiteNow}, acquire(store)...)
		if code != 0 {
			t.Fatalf("acquire behind a guard abandoned 2 min ago: exit %d %s", code, out)
		}
		journal, err := os.ReadFile(filepath.Join(store, "reaped.log"))
		if err != nil || !strings.Contains(string(journal), `"event":"guard_reaped"`) {
			t.Errorf("reaped.log = %q, %v; want the guard's recovery", journal, err)
		}
	})

	t.Run("a fresh guard under a clock in the future", func(t *testing.T) {
		store := t.TempDir()
		guard := plantGuard(t, store, time.Now())
		year2100 := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
		type result struct {
			out  string
			code int
			err  error
		}
		done := make(chan result, 1)
		go func() {
			out, code, err := execute(lease, []string{EnvVar + "=" + strconv.FormatInt(year2100, 10)}, acquire(store)...)
			done <- result{out, code, err}
		}()
		select {
		case r := <-done:
			t.Fatalf("acquire did not wait for a fresh guard: exit %d %s %v", r.code, r.out, r.err)
		case <-time.After(500 * time.Millisecond):
		}
		if err := os.Remove(guard); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.err != nil || r.code != 0 {
			t.Fatalf("acquire once the guard was left: exit %d %s %v", r.code, r.out, r.err)
		}
		if journal, err := os.ReadFile(filepath.Join(store, "reaped.log")); err == nil {
			t.Errorf("a fresh guard was judged abandoned: reaped.log = %s", journal)
		}
	})
}
