package dirstore

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/storefile"
	"github.com/durable-lease/durable-lease/lease"
)

// TestHostileRecordFiles plants what another local user (or a broken tool)
// could put where a record belongs. Nothing may hang, nothing behind the
// entry may be read or shown, the whole store stays listable, and an
// acquire replaces the entry itself, never what it points to.
func TestHostileRecordFiles(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte(`{"v":1,"owner":"SECRET-CONTENT"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, []byte(`{"v":1,"pad":"`+strings.Repeat("x", lease.MaxRecordBytes)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		plant func(t *testing.T, path string)
	}{
		{"fifo", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o666); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink to a secret", func(t *testing.T, path string) {
			if err := os.Symlink(secret, path); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink to /dev/zero", func(t *testing.T, path string) {
			if err := os.Symlink("/dev/zero", path); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o777); err != nil {
				t.Fatal(err)
			}
		}},
		{"huge", func(t *testing.T, path string) {
			if err := os.Link(big, path); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, fb := realStore(t)
			dir := fb.dir
			if err := os.MkdirAll(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			mustAcquire(t, s, "fine", "o", 1)
			tt.plant(t, filepath.Join(dir, "k.json"))

			done := make(chan struct{})
			go func() {
				defer close(done)
				st, err := s.Status(context.Background(), "k")
				if err != nil || st.State != lease.Unknown {
					t.Errorf("status of a planted %s: %+v, %v; want unknown", tt.name, st, err)
				}
				all, err := s.List(context.Background())
				if err != nil || len(all) < 1 {
					t.Errorf("list with a planted %s: %v, %v; want the store listed", tt.name, all, err)
				}
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("reading a planted %s hangs", tt.name)
			}
			if tt.name == "directory" {
				return // an acquire cannot rename a file over a directory; it fails, nothing else
			}
			acq, err := s.Acquire(context.Background(), lease.Request{Kind: "k", Owner: "o", TTLMinutes: 1})
			if err != nil || !acq.TookOverExpired {
				t.Fatalf("acquire over a planted %s: %+v, %v; want a takeover", tt.name, acq, err)
			}
			if fi, err := os.Lstat(filepath.Join(dir, "k.json")); err != nil || !fi.Mode().IsRegular() {
				t.Errorf("k.json after the takeover: %v, %v; want our regular record", fi, err)
			}
			journal, _ := os.ReadFile(filepath.Join(dir, JournalName))
			if strings.Contains(string(journal), "SECRET-CONTENT") || strings.Contains(string(journal), "xxxx") {
				t.Errorf("the journal copied content from behind the entry:\n%.300s", journal)
			}
			if b, _ := os.ReadFile(secret); !strings.Contains(string(b), "SECRET-CONTENT") {
				t.Errorf("the symlink's target was changed: %q", b)
			}
		})
	}
}

func TestJournalRefusesASymlink(t *testing.T) {
	s, fb := realStore(t)
	dir := fb.dir
	outside := filepath.Join(t.TempDir(), "outside.log")
	if err := os.WriteFile(outside, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, JournalName)); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, s, "k", "o", 1)
	if _, err := s.ForceRelease(context.Background(), "k", "op"); err == nil {
		t.Errorf("a forced release journaled through a symlink (or skipped the journal)")
	}
	if b, _ := os.ReadFile(outside); len(b) != 0 {
		t.Errorf("the journal was appended outside the store: %q", b)
	}
}

// TestSweepRemovesDeadTemporaries: what processes killed mid-operation
// leave (a guard being created, reaped or left; a record being written)
// is removed by reconcile once it is older than the guard stale bound,
// while a live process's temporaries, fresh ones and anything else stay.
func TestSweepRemovesDeadTemporaries(t *testing.T) {
	s, err := OpenWith(filepath.Join(t.TempDir(), "store"), Options{GuardStale: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b := s.Backend().(*Backend)
	mustAcquire(t, s, "k", "o", 1)
	old := time.Now().Add(-time.Hour)
	plantDir := func(name string, locked bool) string {
		p := filepath.Join(b.dir, name)
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.Mkdir(p, 0o777))
		h := selfHolder()
		h.ID, h.Lock = "x", true
		body, _ := json.Marshal(h)
		f, err := createLockedFile(filepath.Join(p, holderFile), body, storefile.Private)
		must(err)
		if locked {
			t.Cleanup(func() { f.Close() })
		} else {
			f.Close()
		}
		must(os.Chtimes(p, old, old))
		return p
	}
	dead := []string{
		plantDir(".guard-k.new-0123456789abcdef", false),
		plantDir(".guard-k.reaped-0123456789abcdef", false),
		plantDir(".guard-other.release-0123456789abcdef", false),
	}
	tmp := filepath.Join(b.dir, ".tmp-k-0123456789abcdef")
	if err := os.WriteFile(tmp, []byte("{"), 0o666); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(tmp, old, old)
	dead = append(dead, tmp)
	alive := plantDir(".guard-k.new-fedcba9876543210", true)
	// The live guard of kind "a.new-b", held by a holder that keeps no
	// lock (an older version, the Node tool): it cannot be proven dead.
	legacy := filepath.Join(b.dir, ".guard-a.new-0123456789abcdef")
	if err := os.Mkdir(legacy, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(legacy, holderFile), []byte(`{"id":"legacy","pid":1}`), 0o666); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(legacy, old, old)
	fresh := filepath.Join(b.dir, ".tmp-k-fresh")
	if err := os.WriteFile(fresh, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range dead {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s survived the sweep", filepath.Base(p))
		}
	}
	for _, p := range []string{alive, legacy, fresh, filepath.Join(b.dir, "k.json")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(p), err)
		}
	}
}

// TestListSurvivesAnUnreadableEntry: an entry the process may not read
// (here: a record whose read fails) is reported on its own, as unknown
// with the reason; the rest of the store is listed and reconcile goes on
// without touching it.
func TestListSurvivesAnUnreadableEntry(t *testing.T) {
	s, fb := realStore(t)
	mustAcquire(t, s, "a", "o", 1)
	mustAcquire(t, s, "c", "o", 1)
	bad := &unreadableBackend{Backend: fb, kind: "b"}
	if err := os.WriteFile(filepath.Join(fb.dir, "b.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2, err := lease.New(bad)
	if err != nil {
		t.Fatal(err)
	}
	all, err := s2.List(context.Background())
	if err != nil || len(all) != 3 {
		t.Fatalf("List = %+v, %v; want three entries", all, err)
	}
	if all[1].Kind != "b" || all[1].State != lease.Unknown || all[1].ReadErr == nil || !strings.Contains(all[1].Record.Reason, "permission denied") {
		t.Errorf("the unreadable entry: %+v", all[1])
	}
	rep, err := s2.Reconcile(context.Background())
	if err != nil || len(rep.Foreign) != 1 || len(rep.Held) != 2 {
		t.Errorf("Reconcile = %+v, %v; want b reported as foreign, a and c held", rep, err)
	}
}

type unreadableBackend struct {
	lease.Backend
	kind string
}

func (b *unreadableBackend) Read(ctx context.Context, kind string) (*lease.Record, error) {
	if kind == b.kind {
		return nil, &os.PathError{Op: "open", Path: kind + ".json", Err: syscall.EACCES}
	}
	return b.Backend.Read(ctx, kind)
}

func TestPayloadDepthIsBounded(t *testing.T) {
	s, _ := realStore(t)
	deep := strings.Repeat("[", lease.MaxPayloadDepth+1) + strings.Repeat("]", lease.MaxPayloadDepth+1)
	if _, err := s.Acquire(context.Background(), lease.Request{Kind: "k", Owner: "o", TTLMinutes: 1, Payload: []byte(deep)}); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("a payload %d deep: %v, want ErrInvalid", lease.MaxPayloadDepth+1, err)
	}
	ok := `{"s":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"","a":` + strings.Repeat("[", lease.MaxPayloadDepth-1) + strings.Repeat("]", lease.MaxPayloadDepth-1) + `}`
	if _, err := s.Acquire(context.Background(), lease.Request{Kind: "k", Owner: "o", TTLMinutes: 1, Payload: []byte(ok)}); err != nil {
		t.Errorf("a payload at the limit (brackets in strings do not count): %v", err)
	}
}
