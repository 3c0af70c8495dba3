package hooktest

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestServicesEnv: .ci/services.sh env prints what the example hooks,
// provisioner and gate read (PGHOST, PGPORT, PGUSER, REDIS_HOST,
// REDIS_PORT: the names services.env hands them here), for the servers it
// starts, as well as the DL_TEST_ names the tests read; test-env, which
// .ci/run exports, prints only the latter. It needs no server: it prints.
func TestServicesEnv(t *testing.T) {
	t.Parallel()
	script := filepath.Join(moduleRoot, ".ci", "services.sh")
	show := `eval "$(sh "$0" "$1")" && env | grep -E '^(PG|REDIS_|DL_TEST_)' | sort`
	for _, tc := range []struct {
		mode, port string
		want       []string
		not        string
	}{
		{"env", "", append(services{pgHost: "127.0.0.1", pgPort: "55432", pgUser: "postgres", redisHost: "127.0.0.1", redisPort: "56379"}.env(),
			"DL_TEST_PGHOST=127.0.0.1", "DL_TEST_PGPORT=55432", "DL_TEST_PGUSER=postgres", "DL_TEST_REDIS_HOST=127.0.0.1", "DL_TEST_REDIS_PORT=56379"), ""},
		{"env", "5999", []string{"PGPORT=5999", "DL_TEST_PGPORT=5999"}, ""},
		{"test-env", "", []string{"DL_TEST_PGHOST=127.0.0.1", "DL_TEST_REDIS_PORT=56379"}, "PGHOST="},
	} {
		var env []string
		for _, kv := range cleanEnv() {
			if !strings.HasPrefix(kv, "DL_TEST_") && !strings.HasPrefix(kv, "DL_SERVICES_") {
				env = append(env, kv) // the defaults, not .ci/run's
			}
		}
		if tc.port != "" {
			env = append(env, "DL_TEST_PGPORT="+tc.port)
		}
		r := runIn(t, t.TempDir(), env, "sh", "-c", show, script, tc.mode)
		if r.err != nil {
			t.Fatalf("services.sh %s: %v\n%s", tc.mode, r.err, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		for _, want := range tc.want {
			found := false
			for _, l := range lines {
				found = found || l == want
			}
			if !found {
				t.Errorf("services.sh %s (DL_TEST_PGPORT=%q) does not export %s; it exports:\n%s", tc.mode, tc.port, want, r.stdout)
			}
		}
		for _, l := range lines {
			if tc.not != "" && strings.HasPrefix(l, tc.not) {
				t.Errorf("services.sh %s exports %s", tc.mode, l)
			}
		}
	}
}
