package gates

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/durable-lease/durable-lease/lease"
)

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		fullGate,
		minimalGate,
		"kind: merge-baton\nphases:\n  - run: make merge\n",
		`{pool: p, env: {A: "${B}"}, phases: [{name: n, run: "echo hi", timeout: 1m}]}`,
		"pool: a\nkind: b\nphases: [{run: x}]\n",
		"pool: &a x\nowner: *a\n",
		"pool: a\nphases:\n  - run: echo 'unterminated\n",
		"pool: a\nttl: 1e999\nheartbeat: 30\n",
		"pool: a\n---\npool: b\n",
		"kind: k\nphases:\n  - run: x\n    reset: true\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const path = "/fuzz/gates/gate.yaml"
		g, err := Parse(data, path)
		if err != nil {
			checkFuzzError(t, data, path, err)
			return
		}
		checkFuzzGate(t, data, g)
	})
}

// checkFuzzError checks the invariants of a refusal.
func checkFuzzError(t *testing.T, data []byte, path string, err error) {
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v does not match ErrInvalid", err)
	}
	if e.Path != path {
		t.Fatalf("error path %q, want %q", e.Path, path)
	}
	if lines := countLines(data); e.Line < 0 || e.Line > lines+1 {
		t.Fatalf("error %v: line %d outside the input's %d lines", err, e.Line, lines)
	}
	if e.Line > 0 && e.Column < 0 {
		t.Fatalf("error %v: column %d", err, e.Column)
	}
}

// countLines counts lines as YAML does: LF, CRLF and a lone CR end one.
func countLines(data []byte) int {
	crlf := bytes.Count(data, []byte("\r\n"))
	return bytes.Count(data, []byte("\n")) + bytes.Count(data, []byte("\r")) - crlf + 1
}

// checkFuzzGate checks the invariants of an accepted gate file.
func checkFuzzGate(t *testing.T, data []byte, g *Gate) {
	if (g.Pool == "") == (g.Kind == "") {
		t.Fatalf("Pool %q and Kind %q: want exactly one", g.Pool, g.Kind)
	}
	if g.Pool != "" && (!filepath.IsAbs(g.Pool) || filepath.Clean(g.Pool) != g.Pool) {
		t.Fatalf("Pool %q is not absolute and clean", g.Pool)
	}
	if g.Kind != "" && !lease.ValidKind(g.Kind) {
		t.Fatalf("Kind %q is not valid", g.Kind)
	}
	if g.TTLMinutes < 0 || g.TTLMinutes > lease.MaxTTLMinutes || g.TTLMinutes != g.TTLMinutes {
		t.Fatalf("TTLMinutes %v out of range", g.TTLMinutes)
	}
	if g.Heartbeat < 0 || g.KillGrace < 0 {
		t.Fatalf("Heartbeat %v KillGrace %v negative", g.Heartbeat, g.KillGrace)
	}
	if len(g.Phases) == 0 {
		t.Fatal("no phases")
	}
	// Reset differs from its default only when the input says so; an
	// escape in a quoted key could spell reset, hence the backslash.
	mayOverride := bytes.Contains(data, []byte("reset")) || bytes.Contains(data, []byte(`\`))
	names := make(map[string]bool)
	for i, p := range g.Phases {
		if strings.TrimSpace(p.Run) == "" {
			t.Fatalf("phase %d has an empty Run", i+1)
		}
		if p.Name == "" || names[p.Name] {
			t.Fatalf("phase %d name %q is empty or repeated", i+1, p.Name)
		}
		names[p.Name] = true
		if p.Timeout < 0 || p.Line < 1 {
			t.Fatalf("phase %d: Timeout %v Line %d", i+1, p.Timeout, p.Line)
		}
		if g.Kind != "" && p.Reset {
			t.Fatalf("phase %d resets a baton's slot", i+1)
		}
		if def := g.Pool != "" && i > 0; p.Reset != def && !mayOverride {
			t.Fatalf("phase %d Reset %v without a reset key", i+1, p.Reset)
		}
	}
	seen := make(map[string]bool)
	for _, v := range g.Env {
		if !validEnvName(v.Name) || seen[v.Name] {
			t.Fatalf("env name %q is invalid or repeated", v.Name)
		}
		seen[v.Name] = true
	}
	// Parse checked the references, so with every name defined Expand
	// cannot fail.
	out, err := g.Expand(func(string) (string, bool) { return "v", true })
	if err != nil || len(out) != len(g.Env) {
		t.Fatalf("Expand = %q, %v", out, err)
	}
}

// TestFuzzCorpus checks that the checked-in seeds are what their names
// say: valid-* files parse and invalid-* files are refused.
func TestFuzzCorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzParse", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		name := filepath.Base(file)
		valid, invalid := strings.HasPrefix(name, "valid-"), strings.HasPrefix(name, "invalid-")
		if !valid && !invalid {
			continue // a crasher the fuzzer added
		}
		t.Run(name, func(t *testing.T) {
			data := readCorpusFile(t, file)
			_, err := Parse(data, "gate.yaml")
			if valid && err != nil {
				t.Errorf("valid seed refused: %v", err)
			}
			if invalid && err == nil {
				t.Error("invalid seed accepted")
			}
		})
	}
}

// readCorpusFile decodes a "go test fuzz v1" file holding one []byte.
func readCorpusFile(t *testing.T, file string) []byte {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	header, body, _ := strings.Cut(string(raw), "\n")
	quoted, ok := strings.CutPrefix(strings.TrimSpace(body), "[]byte(")
	if header != "go test fuzz v1" || !ok {
		t.Fatalf("%s is not a go test fuzz v1 []byte file", file)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(quoted, ")"))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return []byte(s)
}
