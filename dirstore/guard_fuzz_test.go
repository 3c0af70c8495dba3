//go:build linux

package dirstore

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	"golang.org/x/sys/unix"
)

// Forms a fuzzed guard's holder.json takes (the form argument modulo
// holderForms).
const (
	holderRegular = iota // a regular file holding the fuzzed bytes
	holderSymlink        // a symlink to a file outside the store holding them
	holderFIFO           // a FIFO
	holderDir            // a directory
	holderMissing        // no holder file (the mkdir form between mkdir and write)
	holderForms
)

// identityPlaceholders lets the fuzzer reach the paths that need this
// host's identity, which it could never guess: in the fuzzed bytes $PID,
// $START, $HOST, $BOOT and $PIDNS stand for this process's values and
// $DEAD for a pid that has exited.
func identityPlaceholders(f *testing.F) *strings.Replacer {
	me := selfHolder()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=")
	if err := cmd.Run(); err != nil {
		f.Fatalf("short child: %v", err)
	}
	esc := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	return strings.NewReplacer(
		// $PIDNS before $PID: the first listed wins where both match.
		"$PIDNS", esc(me.PIDNS), "$PID", strconv.Itoa(me.PID),
		"$START", strconv.FormatUint(me.Start, 10), "$HOST", esc(me.Host), "$BOOT", esc(me.Boot),
		"$DEAD", strconv.Itoa(cmd.ProcessState.Pid()),
	)
}

var describePattern = regexp.MustCompile(`^(pid -?[0-9]+|an unidentified holder)$`)

// FuzzGuardHolder: whatever a guard's holder.json holds (ours, the Node
// tool's {"id","pid"}, another tool's, garbage, or something that is not a
// regular file), judging and reaping the guard never panics, never hangs,
// never touches anything outside the store, and never judges a fresh guard
// dead without proof: a holder is either decoded exactly or treated as
// unidentified, and an unidentified guard is judged by age alone.
func FuzzGuardHolder(f *testing.F) {
	f.Add([]byte(`{"id":"x","pid":0}`), uint8(holderRegular), false)
	repl := identityPlaceholders(f)
	me := selfHolder()
	f.Fuzz(func(t *testing.T, raw []byte, form uint8, old bool) {
		data := []byte(repl.Replace(string(raw)))
		form %= holderForms

		// Decoding alone: nil, or a holder with an id that survives a
		// round trip through our own encoding.
		h := parseHolder(data)
		if h != nil {
			if h.ID == "" {
				t.Fatalf("parseHolder(%q) = %+v: a holder without an id", data, h)
			}
			enc, err := json.Marshal(h)
			if err != nil {
				t.Fatalf("marshal %+v: %v", h, err)
			}
			if h2 := parseHolder(enc); !reflect.DeepEqual(h, h2) {
				t.Fatalf("holder changed in a round trip: %+v -> %s -> %+v", h, enc, h2)
			}
		}

		root := t.TempDir()
		dir := filepath.Join(root, "store")
		guard := filepath.Join(dir, ".guard-k")
		if err := os.MkdirAll(guard, 0o777); err != nil {
			t.Fatal(err)
		}
		hf := filepath.Join(guard, holderFile)
		outside := filepath.Join(root, "outside.json")
		if err := os.WriteFile(outside, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var err error
		switch form {
		case holderRegular:
			err = os.WriteFile(hf, data, 0o644)
		case holderSymlink:
			err = os.Symlink(outside, hf)
		case holderFIFO:
			err = unix.Mkfifo(hf, 0o644)
		case holderDir:
			err = os.Mkdir(hf, 0o777)
		}
		if err != nil {
			t.Fatal(err)
		}
		if old {
			then := time.Now().Add(-2 * DefaultGuardStale)
			if err := os.Chtimes(guard, then, then); err != nil {
				t.Fatal(err)
			}
		}
		b := testBackend(t, dir, lease.WallClock{}, guardConfig{wait: time.Second, stale: DefaultGuardStale})

		v := b.judgeGuard(guard)
		if d := v.describe(); !describePattern.MatchString(d) {
			t.Fatalf("describe() = %q: only a pid or 'an unidentified holder' may be shown", d)
		}
		if form != holderRegular || len(data) > maxHolderBytes {
			h = nil // only a regular file is ever read, and only so much of it
		}
		if !reflect.DeepEqual(v.holder, h) {
			t.Fatalf("judged holder %+v, decoded %+v (form %d)", v.holder, h, form)
		}
		v.close()
		t.Logf("form %d, old %v, identified %v: stale %v (%s)", form, old, h != nil, v.stale, v.reason)
		if v.stale && v.reason == "" {
			t.Fatal("judged stale without a reason")
		}
		// A fresh guard is judged dead only on a proof: the free lock of
		// a holder on this host that says it keeps one, or the process
		// check of a fully identified holder.
		_, _, known := func() (bool, string, bool) {
			if h == nil {
				return false, "", false
			}
			return h.process().Alive()
		}()
		lockProof := h != nil && h.Lock && sameHost(h)
		if !old && v.stale && !lockProof && !known {
			t.Fatalf("a fresh guard with holder %+v judged dead: %s", h, v.reason)
		}
		if old && h == nil && (!v.stale || !strings.Contains(v.reason, "unidentified")) {
			t.Fatalf("an old unidentified guard judged %+v", v)
		}
		if h != nil && !h.Lock && h.PID == me.PID && h.Start == me.Start && h.Host == me.Host &&
			h.Boot == me.Boot && h.PIDNS == me.PIDNS && me.Boot != "" && me.PIDNS != "" && me.Start != 0 && v.stale {
			t.Fatalf("this live process's guard judged dead: %s", v.reason)
		}

		if err := b.reapGuard("k", guard); err != nil {
			t.Fatalf("reapGuard: %v", err)
		}
		if got, err := os.ReadFile(outside); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("the file outside the store changed: %q, %v", got, err)
		}
		_, gerr := os.Lstat(guard)
		events := guardEvents(t, dir)
		if !v.stale {
			// The judgement cannot change between the two looks, except
			// that a lock proof holds for both.
			if gerr != nil || len(events) != 0 {
				t.Fatalf("a live guard was reaped (%v, events %v)", gerr, events)
			}
			return
		}
		if gerr == nil {
			t.Fatal("a dead guard survived its reap")
		}
		if len(events) != 1 || events[0].Event != lease.EventGuardReaped || events[0].Reason == "" {
			t.Fatalf("reap journaled %+v, want one guard_reaped with a reason", events)
		}
		if h != nil && (events[0].Holder != h.ID || events[0].PID != h.PID) {
			t.Fatalf("reap journaled holder %q pid %d, want %q %d", events[0].Holder, events[0].PID, h.ID, h.PID)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Fatalf("the store holds more than the journal after a reap: %v", entries)
		}
	})
}

// guardEvents reads the journal of dir; none when it does not exist.
func guardEvents(t *testing.T, dir string) []lease.Event {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, JournalName))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var events []lease.Event
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var e lease.Event
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("journal line %q: %v", line, err)
		}
		events = append(events, e)
	}
	return events
}
