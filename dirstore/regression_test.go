package dirstore

// Regression tests for bugs found while the test suite was written. The
// comment above each says what was wrong and which part of the contract
// (docs/PROTOCOL.md) it broke.

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// Was a bug (store.go Heartbeat + record.go DecodeRecord): DecodeRecord takes
// Record.Kind from the file's "kind" field without checking it against the
// file stem, and Heartbeat writes the refreshed copy through
// Backend.write, which names the file after r.Kind. PROTOCOL.md §2: the
// kind field is "the kind, equal to the file stem", and a heartbeat
// "rewrite[s] the record". Actual: the refreshed record lands in ANOTHER
// file (b.json, or ".json" for "kind":"" / "kind":null, or outside the
// store for "kind":"x/../../escaped"), the real record is never refreshed, and the
// holder's lease expires although every heartbeat "succeeded".
func TestRegressionHeartbeatWritesToTheRecordsKindField(t *testing.T) {
	tests := []struct {
		name      string
		fileKind  string // value of the "kind" field inside a.json
		strayPath string // relative to the store directory
	}{
		{"another kind", "b", "b.json"},
		{"empty kind", "", ".json"},
		{"path traversal", "x/../../escaped", "../escaped.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk := newTestStore(t)
			path := writeFile(t, s.Dir(), "a.json", recordJSON(tt.fileKind, "agent-7", "tok", t0, 1))
			before := readBytes(t, path)
			clk.Advance(30 * time.Second)
			_, err := s.Heartbeat(bg, lease.Ref{Kind: "a", Owner: "agent-7", Token: "tok"})
			stray := filepath.Join(s.Dir(), tt.strayPath)
			if exists(t, stray) {
				t.Errorf("Heartbeat(a) wrote %s (err %v); it must only ever write a.json", stray, err)
			}
			if err == nil && string(readBytes(t, path)) == string(before) {
				t.Errorf("Heartbeat(a) reported success but a.json was not refreshed")
			}
		})
	}
}

// Was a bug (file.go Backend.Update / guard.go enterGuard): every guarded
// operation creates the store directory (enterGuard's MkdirAll) before the
// callback decides anything, so a REFUSED heartbeat on a store that does
// not exist yet leaves the directory behind. PROTOCOL.md §1: "The store
// directory is created by the first mutation, never by a read or by a
// refused command" (also newBackend's doc comment). The same happens
// for no-op Release/Reap/ForceRelease of an absent lease.
func TestRegressionRefusedHeartbeatCreatesStore(t *testing.T) {
	s, _ := newTestStore(t)
	if _, err := s.Heartbeat(bg, lease.Ref{Kind: "slot-1", Owner: "agent-7", Token: "tok"}); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Heartbeat = %v, want ErrNotHeld", err)
	}
	if _, err := os.Stat(s.Dir()); err == nil {
		t.Errorf("a refused heartbeat (not_held) created the store directory %s", s.Dir())
	}
}

// Was a bug (validate.go CompileOwnerPattern): a pattern ending in `\\$` (an
// escaped backslash, then the end anchor) is anchored, but the check
// strings.HasSuffix(pattern, `\$`) rejects it. PROTOCOL.md §4.1: a pattern
// "MUST start with ^ and end with an unescaped $"; the $ here is unescaped.
func TestRegressionOwnerPatternEndingInEscapedBackslash(t *testing.T) {
	re, err := lease.CompileOwnerPattern(`^ci\\$`)
	if err != nil {
		t.Fatalf(`CompileOwnerPattern(^ci\\$) = %v; the pattern is anchored`, err)
	}
	if !re.MatchString(`ci\`) || re.MatchString(`ci\x`) {
		t.Errorf("pattern does not match as an anchored pattern")
	}
}

// Was a bug (validate.go CompileOwnerPattern): ^a|b$ passed the textual
// anchoring rule, but Go's alternation binds loosest, so it matched any owner
// starting with a or ending with b. The fence must match whole owners only.
func TestRegressionOwnerPatternAlternation(t *testing.T) {
	re, err := lease.CompileOwnerPattern(`^acme-[a-z]+|ci$`)
	if err != nil {
		t.Fatal(err)
	}
	for owner, want := range map[string]bool{"acme-x": true, "ci": true, "acme-x/any thing": false, "evil-ci": false} {
		if got := re.MatchString(owner); got != want {
			t.Errorf("fence matches %q = %v, want %v", owner, got, want)
		}
	}
}

// Was a bug (store.go Acquire): a takeover whose journal line could not be
// written still replaced the record and returned an error, so the caller
// treated it as a failure and the lease stayed held with a token nobody had.
// A takeover, reap or forced release that cannot be journaled must not
// happen at all.
func TestRegressionUnjournaledTakeoverDoesNotHappen(t *testing.T) {
	s, clk := newTestStore(t)
	mustAcquire(t, s, "deploy", "agent-1", 1)
	if err := os.Mkdir(filepath.Join(s.Dir(), JournalName), 0o777); err != nil {
		t.Fatal(err) // a directory where the journal file should be
	}
	before := readBytes(t, filepath.Join(s.Dir(), "deploy.json"))
	clk.Advance(2 * time.Minute)
	if _, err := s.Acquire(bg, lease.Request{Kind: "deploy", Owner: "agent-2", TTLMinutes: 1}); err == nil {
		t.Fatal("a takeover that could not be journaled succeeded")
	}
	if _, err := s.Reap(bg, "deploy"); err == nil {
		t.Fatal("a reap that could not be journaled succeeded")
	}
	if _, err := s.ForceRelease(bg, "deploy", ""); err == nil {
		t.Fatal("a forced release that could not be journaled succeeded")
	}
	if after := readBytes(t, filepath.Join(s.Dir(), "deploy.json")); string(after) != string(before) {
		t.Errorf("the record changed:\n%s\nwant\n%s", after, before)
	}
}
