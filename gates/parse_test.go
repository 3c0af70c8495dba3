package gates

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// gatePath is where the parse tests pretend their files live.
const gatePath = "/srv/repo/ci/gate.yaml"

const fullGate = `# a gate file using every field
pool: ../pool/pool.json
owner: ci-e2e
ttl: 2.5
heartbeat: 30s
killGrace: 5s
env:
  DATABASE_URL: postgresql://127.0.0.1:${PGPORT}/${POOL_SLOT_DB}
  RETRIES: 3
  RATIO: 1.50
  DEBUG: True
  QUOTED: "a b"
  HEX: 0x1F
  COST: $$5
phases:
  - name: unit
    run: go test ./...
  - name: e2e
    run: npm run test:e2e
    timeout: 10m
  - run: |
      echo one
      echo two
    reset: false
  - name: again
    run: "true"
    reset: true
`

func TestParseFull(t *testing.T) {
	g, err := Parse([]byte(fullGate), gatePath)
	if err != nil {
		t.Fatal(err)
	}
	want := &Gate{
		Path:       gatePath,
		Dir:        "/srv/repo/ci",
		Pool:       "/srv/repo/pool/pool.json",
		Owner:      "ci-e2e",
		TTLMinutes: 2.5,
		Heartbeat:  30 * time.Second,
		KillGrace:  5 * time.Second,
		Env: []EnvVar{
			{Name: "DATABASE_URL", Value: "postgresql://127.0.0.1:${PGPORT}/${POOL_SLOT_DB}", Line: 8, Column: 3},
			{Name: "RETRIES", Value: "3", Line: 9, Column: 3},
			{Name: "RATIO", Value: "1.50", Line: 10, Column: 3},
			{Name: "DEBUG", Value: "True", Line: 11, Column: 3},
			{Name: "QUOTED", Value: "a b", Line: 12, Column: 3},
			{Name: "HEX", Value: "0x1F", Line: 13, Column: 3},
			{Name: "COST", Value: "$$5", Line: 14, Column: 3},
		},
		Phases: []Phase{
			{Name: "unit", Run: "go test ./...", Reset: false, Line: 16, Column: 5},
			{Name: "e2e", Run: "npm run test:e2e", Reset: true, Timeout: 10 * time.Minute, Line: 18, Column: 5},
			{Name: "phase-3", Run: "echo one\necho two\n", Reset: false, Line: 21, Column: 5},
			{Name: "again", Run: "true", Reset: true, Line: 25, Column: 5},
		},
		display: gatePath,
	}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("Parse:\n got %+v\nwant %+v", g, want)
	}
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		check func(t *testing.T, g *Gate)
	}{
		{"baton", "kind: merge-baton\nphases:\n  - run: make merge\n  - run: make publish\n    reset: false\n",
			func(t *testing.T, g *Gate) {
				if g.Kind != "merge-baton" || g.Pool != "" {
					t.Errorf("Kind %q Pool %q, want merge-baton and none", g.Kind, g.Pool)
				}
				if len(g.Phases) != 2 || g.Phases[0].Reset || g.Phases[1].Reset {
					t.Errorf("phases %+v: want two without reset", g.Phases)
				}
				if g.Phases[0].Name != "phase-1" || g.Phases[1].Name != "phase-2" {
					t.Errorf("names %q %q, want phase-1 phase-2", g.Phases[0].Name, g.Phases[1].Name)
				}
			}},
		{"absolute pool", "pool: /etc/pools/../pools/a.json\nphases: [{run: x}]\n",
			func(t *testing.T, g *Gate) {
				if g.Pool != "/etc/pools/a.json" {
					t.Errorf("Pool %q, want /etc/pools/a.json", g.Pool)
				}
			}},
		{"pool beside the file", "pool: pool.json\nphases: [{run: x}]\n",
			func(t *testing.T, g *Gate) {
				if g.Pool != "/srv/repo/ci/pool.json" {
					t.Errorf("Pool %q, want /srv/repo/ci/pool.json", g.Pool)
				}
			}},
		{"first phase reset explicitly", "pool: p\nphases:\n  - run: a\n    reset: true\n  - run: b\n",
			func(t *testing.T, g *Gate) {
				if !g.Phases[0].Reset || !g.Phases[1].Reset {
					t.Errorf("resets %v %v, want true true", g.Phases[0].Reset, g.Phases[1].Reset)
				}
			}},
		{"flow style", `{pool: p, env: {A: "1"}, phases: [{name: n, run: "echo hi"}]}`,
			func(t *testing.T, g *Gate) {
				if len(g.Env) != 1 || g.Env[0].Value != "1" || g.Phases[0].Name != "n" || g.Phases[0].Line != 1 {
					t.Errorf("got %+v", g)
				}
			}},
		{"integer ttl and document markers", "---\npool: p\nttl: 527040\nphases: [{run: x}]\n...\n",
			func(t *testing.T, g *Gate) {
				if g.TTLMinutes != 527040 {
					t.Errorf("TTLMinutes %v, want 527040", g.TTLMinutes)
				}
			}},
		{"byte order mark", "\ufeffpool: p\nphases: [{run: x}]\n",
			func(t *testing.T, g *Gate) {
				if g.Pool != "/srv/repo/ci/p" {
					t.Errorf("Pool %q", g.Pool)
				}
			}},
		{"baton reset false", "kind: k\nphases:\n  - run: x\n    reset: false\n",
			func(t *testing.T, g *Gate) {
				if g.Phases[0].Reset {
					t.Error("Reset true, want false")
				}
			}},
		{"empty env", "pool: p\nenv: {}\nphases: [{run: x}]\n",
			func(t *testing.T, g *Gate) {
				if len(g.Env) != 0 {
					t.Errorf("Env %v, want none", g.Env)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Parse([]byte(tt.src), gatePath)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, g)
		})
	}
}

func TestParseInvalid(t *testing.T) {
	const ok = "\nphases: [{run: x}]\n" // completes a file that has pool or kind
	tests := []struct {
		name string
		src  string
		want string // the whole message, or its start when it ends in "..."
	}{
		// Text and YAML structure.
		{"nul byte", "pool: a\x00b" + ok, "g.yaml:1:8: NUL byte; a gate file is text"},
		{"nul after a byte order mark", "\ufeffpool: \x00" + ok, "g.yaml:1:7: NUL byte; a gate file is text"},
		{"nul on a later line", "pool: a\r\nowner: b\rx\x00" + ok, "g.yaml:3:2: NUL byte; a gate file is text"},
		{"invalid utf-8", "pool: é\xff" + ok, "g.yaml:1:8: invalid UTF-8 (byte 0xff); a gate file is UTF-8 text"},
		{"syntax error", "pool: [a\nphases: x\n", "g.yaml:2:1: YAML syntax error: ',' or ']' must be specified"},
		{"bad indentation", "pool: a\n  kind: b\n", "g.yaml:1:7: YAML syntax error: mapping value is not allowed in this context"},
		{"empty", "", "g.yaml: empty gate file"},
		{"only comments", "# nothing\n\n   # here\n", "g.yaml: empty gate file"},
		{"only a document header", "---\n# empty\n", "g.yaml: empty gate file"},
		{"two documents", "pool: a" + ok + "---\npool: b\n", "g.yaml:3:1: a second YAML document; ..."},
		{"top level list", "- pool: a\n", "g.yaml:1:1: the top level of a gate file must be a mapping (pool:, phases:, ...), found a list"},
		{"top level scalar", "pool\n", "g.yaml:1:1: the top level of a gate file must be a mapping (pool:, phases:, ...), found a string"},
		{"anchor", "pool: &p a" + ok, "g.yaml:1:7: YAML anchors (&p) are not supported in a gate file; ..."},
		{"alias", "pool: a\nowner: *p" + ok, "g.yaml:2:8: YAML aliases (*p) are not supported in a gate file; ..."},
		{"merge key", "pool: a\nenv:\n  <<: {A: b}" + ok, "g.yaml:3:3: YAML merge keys (<<) are not supported in a gate file; write the keys out"},
		{"tag", "pool: !!str 1" + ok, "g.yaml:1:7: YAML tags (!!str) are not supported in a gate file; ..."},
		{"too many tokens", "pool: a\nphases: [" + strings.Repeat("x,", maxTokens) + "]\n", "g.yaml:2:..."},
		{"too large", "pool: a\nowner: " + strings.Repeat("x", maxFileSize), "g.yaml: gate file is larger than 1048576 bytes (1 MiB)"},

		// Keys.
		{"unknown key", "pool: a\npools: b" + ok, `g.yaml:2:1: unknown key "pools" in the gate file; allowed keys: pool, kind, owner, ttl, heartbeat, killGrace, env, phases`},
		{"long key is clipped", "pool: a\n" + strings.Repeat("k", 5000) + ": b" + ok, `g.yaml:2:1: unknown key "` + strings.Repeat("k", maxEcho) + `..." in the gate file; ...`},
		{"key case", "pool: a\nkillgrace: 5s" + ok, `g.yaml:2:1: unknown key "killgrace" in the gate file; did you mean "killGrace"? (keys are case-sensitive)`},
		{"unknown phase key", "pool: a\nphases:\n  - run: x\n    cmd: y\n", `g.yaml:4:5: unknown key "cmd" in phase 1; allowed keys: name, run, reset, timeout`},
		{"duplicate key", "pool: a\nowner: o\nowner: p" + ok, `g.yaml:3:1: duplicate key "owner" in the gate file (first at 2:1)`},
		{"duplicate phase key", "pool: a\nphases:\n  - run: x\n    run: y\n", `g.yaml:4:5: duplicate key "run" in phase 1 (first at 3:5)`},
		{"duplicate env key", "pool: a\nenv:\n  A: 1\n  A: 2" + ok, `g.yaml:4:3: duplicate key "A" in env (first at 3:3)`},
		{"number key", "pool: a\n1: b" + ok, "g.yaml:2:1: a key in the gate file must be a string, found a number (1)"},
		{"complex key", "pool: a\n? owner\n: b" + ok, "g.yaml:2:1: complex keys (?) are not supported in the gate file"},

		// pool and kind.
		{"pool and kind", "pool: a\nkind: b" + ok, "g.yaml:2:1: kind conflicts with pool at 1:1: give either pool (a slot pool file) or kind (a single baton lease), not both"},
		{"neither pool nor kind", "# c\nowner: o" + ok, "g.yaml:2:1: the gate file needs pool (a slot pool file) or kind (a single baton lease)"},
		{"pool empty", `pool: ""` + ok, "g.yaml:1:7: pool must name the pool file, found an empty string"},
		{"pool number", "pool: 12" + ok, `g.yaml:1:7: pool must be a string, found a number (12); quote it: pool: "12"`},
		{"pool null", "pool:" + ok, "g.yaml:1:6: pool must be a string, found null (no value)"},
		{"kind invalid", "kind: Merge Baton" + ok, `g.yaml:1:7: kind "Merge Baton" must match ^[a-z0-9][a-z0-9._-]{0,127}$`},
		{"kind bool", "kind: true" + ok, `g.yaml:1:7: kind must be a string, found a boolean (true); quote it: kind: "true"`},

		// owner, ttl, durations.
		{"owner number", "pool: a\nowner: 7" + ok, `g.yaml:2:8: owner must be a string, found a number (7); quote it: owner: "7"`},
		{"owner empty", "pool: a\nowner: ''" + ok, "g.yaml:2:8: owner must not be empty; leave the key out for the default owner"},
		{"ttl quoted", "pool: a\nttl: '10'" + ok, `g.yaml:2:6: ttl must be a number, found the string "10"; write it unquoted`},
		{"ttl bool", "pool: a\nttl: true" + ok, "g.yaml:2:6: ttl must be a number, found a boolean (true)"},
		{"ttl zero", "pool: a\nttl: 0" + ok, "g.yaml:2:6: ttl 0 must be a number of minutes between 0.001 and 527040 minutes"},
		{"ttl negative", "pool: a\nttl: -1.5" + ok, "g.yaml:2:6: ttl -1.5 must be ..."},
		{"ttl too large", "pool: a\nttl: 527040.5" + ok, "g.yaml:2:6: ttl 527040.5 must be ..."},
		{"ttl overflow", "pool: a\nttl: 1e999" + ok, "g.yaml:2:6: ttl 1e999 must be ..."},
		{"ttl infinite", "pool: a\nttl: .inf" + ok, "g.yaml:2:6: ttl .inf must be ..."},
		{"ttl nan", "pool: a\nttl: .nan" + ok, "g.yaml:2:6: ttl .nan must be ..."},
		{"heartbeat bare number", "pool: a\nheartbeat: 30" + ok, "g.yaml:2:12: heartbeat must be a duration with a unit, found the bare number 30; write 30s (or 30m)"},
		{"heartbeat quoted number", "pool: a\nheartbeat: '30'" + ok, `g.yaml:2:12: heartbeat "30" has no unit; write 30s (or 30m)`},
		{"heartbeat garbage", "pool: a\nheartbeat: soon" + ok, `g.yaml:2:12: heartbeat "soon" is not a duration such as "30s" or "5m": invalid duration "soon"`},
		{"heartbeat zero", "pool: a\nheartbeat: 0s" + ok, `g.yaml:2:12: heartbeat "0s" must be greater than zero`},
		{"heartbeat list", "pool: a\nheartbeat: [1]" + ok, `g.yaml:2:12: heartbeat must be a duration such as "30s" or "5m", found a list`},
		{"killGrace negative", "pool: a\nkillGrace: -5s" + ok, `g.yaml:2:12: killGrace "-5s" must be greater than zero`},
		{"timeout zero", "pool: a\nphases:\n  - run: x\n    timeout: 0m\n", `g.yaml:4:14: timeout "0m" must be greater than zero`},
		{"timeout bare float", "pool: a\nphases:\n  - run: x\n    timeout: 1.5\n", "g.yaml:4:14: timeout must be a duration with a unit, found the bare number 1.5; ..."},

		// env.
		{"env list", "pool: a\nenv: [A]" + ok, "g.yaml:2:6: env must be a mapping of NAME: value, found a list"},
		{"env null", "pool: a\nenv:" + ok, "g.yaml:2:5: env must be a mapping of NAME: value, found null (no value)"},
		{"env value null", "pool: a\nenv:\n  A:\n  B: x" + ok, `g.yaml:3:5: env A has no value; write A: "" for an empty string`},
		{"env value mapping", "pool: a\nenv:\n  A: {b: c}" + ok, "g.yaml:3:6: env A must be a string, number or boolean, found a mapping"},
		{"env value list", "pool: a\nenv:\n  A:\n    - b" + ok, "g.yaml:4:5: env A must be a string, number or boolean, found a list"},
		{"env bad name", "pool: a\nenv:\n  1A: x" + ok, `g.yaml:3:3: env name "1A" must match ^[A-Za-z_][A-Za-z0-9_]*$`},
		{"env dashed name", "pool: a\nenv:\n  MY-VAR: x" + ok, `g.yaml:3:3: env name "MY-VAR" must match ...`},
		{"env unterminated reference", "pool: a\nenv:\n  A: x${B" + ok, `g.yaml:3:6: env A: unterminated "${" (write $$ for a literal $)`},
		{"env malformed reference", "pool: a\nenv:\n  A: ${1x}" + ok, `g.yaml:3:6: env A: malformed reference "${1x}": only ${NAME} is supported, ...`},
		{"env lone dollar", "pool: a\nenv:\n  A: cost $5" + ok, `g.yaml:3:6: env A: a "$" not followed by a name or {name} (write $$ for a literal $)`},

		// phases.
		{"phases missing", "pool: a\n", "g.yaml:1:1: the gate file has no phases: list at least one phase with a run command"},
		{"phases empty", "pool: a\nphases: []\n", "g.yaml:2:9: phases is empty: list at least one phase with a run command"},
		{"phases mapping", "pool: a\nphases:\n  run: x\n", "g.yaml:3:3: phases must be a list of phases (- run: ...), found a mapping"},
		{"phase string", "pool: a\nphases:\n  - go test\n", "g.yaml:3:5: phase 1 must be a mapping with a run key, found a string; write - run: go test"},
		{"phase null", "pool: a\nphases:\n  - run: x\n  -\n", "g.yaml:4:5: phase 2 must be a mapping with a run key, found null (no value)"},
		{"phase without run", "pool: a\nphases:\n  - run: x\n  - name: e2e\n", "g.yaml:4:5: phase 2 (e2e) has no run key: give the shell command to run"},
		{"run empty", "pool: a\nphases:\n  - run: ''\n", "g.yaml:3:5: phase 1 (phase-1) has an empty run: give the shell command to run"},
		{"run whitespace", "pool: a\nphases:\n  - name: x\n    run: \"  \\t\\n\"\n", "g.yaml:3:5: phase 1 (x) has an empty run: ..."},
		{"run null", "pool: a\nphases:\n  - run:\n", "g.yaml:3:10: run must be a string, found null (no value)"},
		{"run number", "pool: a\nphases:\n  - run: 42\n", `g.yaml:3:10: run must be a string, found a number (42); quote it: run: "42"`},
		{"run bad shell", "pool: a\nphases:\n  - name: unit\n    run: echo 'oops\n", "g.yaml:3:5: phase 1 (unit): run is not valid bash: 1:6: reached EOF without closing quote `'`"},
		{"run bad shell block", "pool: a\nphases:\n  - run: |\n      if true; then\n        echo\n", "g.yaml:3:5: phase 1 (phase-1): run is not valid bash: 1:1: ..."},
		{"run only comment", "pool: a\nphases:\n  - run: '# todo'\n", "g.yaml:3:5: phase 1 (phase-1): run has only comments; give the shell command to run"},
		{"name number", "pool: a\nphases:\n  - name: 1\n    run: x\n", `g.yaml:3:11: name must be a string, found a number (1); quote it: name: "1"`},
		{"name empty", "pool: a\nphases:\n  - name: ' '\n    run: x\n", "g.yaml:3:11: name must not be empty; leave the key out for the default phase-N"},
		{"name control character", "pool: a\nphases:\n  - name: \"a\\tb\"\n    run: x\n", `g.yaml:3:11: name "a\tb" must not contain control characters such as newlines or tabs`},
		{"duplicate phase name", "pool: a\nphases:\n  - name: t\n    run: x\n  - name: t\n    run: y\n", `g.yaml:5:11: duplicate phase name "t" (phase 1 at 3:5 has it); phase names must be unique`},
		{"duplicate default name", "pool: a\nphases:\n  - name: phase-2\n    run: x\n  - run: y\n", `g.yaml:5:5: duplicate phase name "phase-2" (phase 1 at 3:5 has it); ...`},
		{"reset string", "pool: a\nphases:\n  - run: x\n    reset: yes\n", `g.yaml:4:12: reset must be true or false, found the string "yes"`},
		{"reset number", "pool: a\nphases:\n  - run: x\n    reset: 1\n", "g.yaml:4:12: reset must be true or false, found a number (1)"},
		{"reset with kind", "phases:\n  - run: x\n  - run: y\n    reset: true\nkind: k\n", "g.yaml:4:12: reset: true needs a pool slot to reset; a kind (baton) lease has none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Parse([]byte(tt.src), "g.yaml")
			if err == nil {
				t.Fatalf("Parse succeeded (%+v), want %q", g, tt.want)
			}
			checkMessage(t, err, tt.want)
		})
	}
}

// checkMessage checks that err is an *Error matching ErrInvalid with the
// message want, or starting with want's text before "..." .
func checkMessage(t *testing.T, err error, want string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("error %v does not match ErrInvalid", err)
	}
	got := err.Error()
	if prefix, cut := strings.CutSuffix(want, "..."); cut {
		if !strings.HasPrefix(got, prefix) {
			t.Errorf("error\n got %q\nwant %q...", got, prefix)
		}
		return
	}
	if got != want {
		t.Errorf("error\n got %q\nwant %q", got, want)
	}
}
