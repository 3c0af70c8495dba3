package dirpool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/storefile"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// queueOf is a queue.json of n live entries (stamped at the pool's now),
// two-space indented as writers write it.
func queueOf(t *testing.T, n int, now time.Time) []byte {
	t.Helper()
	at := lease.FormatTime(now)
	doc := queueDoc{Entries: make([]pool.Entry, n)}
	for i := range doc.Entries {
		id := fmt.Sprintf("r%06d-0000-4000-8000-000000000000", i)
		doc.Entries[i] = pool.Entry{ID: id, Owner: "agent-" + fmt.Sprint(i), Session: "agent-" + fmt.Sprint(i),
			Mode: pool.ModeAsync, EnqueuedAt: at, Heartbeat: at}
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(data, '\n')
}

// unchanged fails the test unless path still holds want.
func unchanged(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s was changed (%d bytes, want %d): %v", path, len(got), len(want), err)
	}
}

// TestStateOverTheBoundIsNeverEmpty: a queue.json of 50 000 waiters (12
// MB, nearly three times the bound) is an error naming the file and the bound
// for every reader and writer, and nothing rewrites it; before, it read
// as an empty queue and the next grant replaced it with one entry, with
// nothing in pool.log. The same for stats.json and a grant file.
func TestStateOverTheBoundIsNeverEmpty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	must(t, os.MkdirAll(tp.Dir(), 0o700))

	big := queueOf(t, 50_000*maxStateBytes/(4<<20), tp.Store().Now())
	if len(big) < 2*maxStateBytes {
		t.Fatalf("the queue is %d bytes, want over twice the bound", len(big))
	}
	queue := filepath.Join(tp.Dir(), pool.QueueFile)
	must(t, os.WriteFile(queue, big, 0o600))
	tooLarge := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, storefile.ErrTooLarge) || !strings.Contains(err.Error(), queue) ||
			!strings.Contains(err.Error(), fmt.Sprintf("is %d bytes", len(big))) || !strings.Contains(err.Error(), fmt.Sprintf("(%d bytes)", maxStateBytes)) {
			t.Fatalf("%s: %v, want an error naming %s, its size and the bound", what, err, queue)
		}
	}
	_, err := tp.Status(ctx)
	tooLarge("status", err)
	_, err = tp.Acquire(ctx, pool.AcquireRequest{Owner: "ci-main", NoWait: true})
	tooLarge("acquire --no-wait", err)
	_, err = tp.Acquire(ctx, pool.AcquireRequest{Owner: "ci-main", Wait: time.Second})
	tooLarge("acquire", err)
	_, err = tp.Request(ctx, "agent-7", "")
	tooLarge("request", err)
	_, err = tp.Pump(ctx, "broker")
	if err != nil {
		t.Fatalf("pump: %v", err) // best effort: it says so on the log
	}
	unchanged(t, queue, big)
	if st, err := tp.Store().Status(ctx, "slot-1"); err != nil || st.State != lease.Free {
		t.Fatalf("slot 1 after the refusals: %+v, %v; want free", st, err)
	}
	if _, err := os.Stat(filepath.Join(tp.Dir(), pool.LogFile)); !os.IsNotExist(err) {
		t.Errorf("pool.log was written: %v", logEvents(t, tp.Dir()))
	}

	// The statistics: read for ETAs (the seed, and a warning), never
	// replaced by a release.
	must(t, os.Remove(queue))
	stats := filepath.Join(tp.Dir(), pool.StatsFile)
	bigStats := []byte(`{"durationsMs": [` + strings.Repeat("1000, ", maxStateBytes/6) + "1000]}\n")
	must(t, os.WriteFile(stats, bigStats, 0o600))
	if _, err := dirStateOf(tp.Pool).Holds(ctx); !errors.Is(err, storefile.ErrTooLarge) || !strings.Contains(err.Error(), stats) {
		t.Fatalf("Holds: %v, want an error naming %s", err, stats)
	}
	g := tp.mustAcquire(t, "ci-main")
	tp.clock.Advance(time.Second)
	if _, err := tp.Release(ctx, "1", "ci-main", g.Token, false); err != nil {
		t.Fatal(err)
	}
	unchanged(t, stats, bigStats)
	if err := dirStateOf(tp.Pool).AddHold(ctx, "ci-main", 5, 10); !errors.Is(err, storefile.ErrTooLarge) {
		t.Fatalf("AddHold over a stats.json over the bound: %v", err)
	}
	unchanged(t, stats, bigStats)

	// A grant file: an error, not "no grant".
	id := "4f1c0000-0000-4000-8000-000000000000"
	must(t, os.MkdirAll(filepath.Join(tp.Dir(), pool.GrantsDir), 0o700))
	must(t, os.WriteFile(dirStateOf(tp.Pool).grantPath(id), bytes.Repeat([]byte(" "), maxStateBytes+1), 0o600))
	if doc, err := dirStateOf(tp.Pool).Grant(ctx, id); doc != nil || !errors.Is(err, storefile.ErrTooLarge) {
		t.Fatalf("Grant: %q, %v; want an error", doc, err)
	}
	if _, err := tp.Claim(ctx, id, "agent-7"); !errors.Is(err, storefile.ErrTooLarge) {
		t.Fatalf("claim: %v, want the grant file's error, not unknown_request", err)
	}
}

// TestStateIsNeverWrittenOverTheBound: a change that would make
// queue.json larger than every reader reads is refused, and the queue
// stays as it was; so is a grant document over it.
func TestStateIsNeverWrittenOverTheBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	must(t, os.MkdirAll(tp.Dir(), 0o700))
	// As many live waiters as fit, less room for one more than a few
	// bytes.
	fits := func(n int) bool { return len(queueOf(t, n, tp.Store().Now())) <= maxStateBytes }
	n, over := 1, 2
	for fits(over) {
		n, over = over, over*2
	}
	for over-n > 1 { // n fits, over does not
		if mid := (n + over) / 2; fits(mid) {
			n = mid
		} else {
			over = mid
		}
	}
	full := queueOf(t, n, tp.Store().Now())
	queue := filepath.Join(tp.Dir(), pool.QueueFile)
	must(t, os.WriteFile(queue, full, 0o600))
	if live, _, err := tp.Backend().Queue(ctx); err != nil || len(live) != n {
		t.Fatalf("a queue of %d bytes: %d entries, %v", len(full), len(live), err)
	}
	_, err := tp.Request(ctx, "agent-late", "")
	if !errors.Is(err, storefile.ErrTooLarge) || !strings.Contains(err.Error(), "would be") || !strings.Contains(err.Error(), queue) {
		t.Fatalf("request that would take queue.json over the bound: %v", err)
	}
	unchanged(t, queue, full)

	err = dirStateOf(tp.Pool).PutGrant(ctx, "4f1c0000-0000-4000-8000-000000000000", bytes.Repeat([]byte(" "), maxStateBytes+1))
	if !errors.Is(err, storefile.ErrTooLarge) {
		t.Fatalf("PutGrant over the bound: %v", err)
	}
}

// TestUnreadableStateIsReplacedLoudly: a queue.json or stats.json that
// is there but is no queue (garbage, a FIFO) reads as empty, as the
// protocol says; the writer that replaces it journals state_file_replaced
// with the reason, so what it held is not lost without a word.
func TestUnreadableStateIsReplacedLoudly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	must(t, os.MkdirAll(tp.Dir(), 0o700))
	must(t, os.WriteFile(filepath.Join(tp.Dir(), pool.QueueFile), []byte(`{"entries": [{"id": "r1", "owner": "a"`), 0o600))
	must(t, os.WriteFile(filepath.Join(tp.Dir(), pool.StatsFile), []byte("not json"), 0o600))
	if live, _, err := tp.Backend().Queue(ctx); err != nil || len(live) != 0 {
		t.Fatalf("Queue of a torn queue.json: %v, %v; want empty", live, err)
	}
	q, err := tp.Request(ctx, "agent-7", "")
	if err != nil {
		t.Fatal(err)
	}
	must(t, tp.Withdraw(ctx, q.RequestID, "agent-7"))
	g := tp.mustAcquire(t, "ci-main")
	tp.clock.Advance(time.Second)
	if _, err := tp.Release(ctx, "1", "ci-main", g.Token, false); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, ev := range eventsNamed(logEvents(t, tp.Dir()), pool.EventStateFileReplaced) {
		if r, _ := ev["reason"].(string); !strings.Contains(r, "not its JSON") {
			t.Errorf("%v: the reason does not say what was wrong", ev)
		}
		files = append(files, fmt.Sprint(ev["file"]))
	}
	if strings.Join(files, " ") != "queue.json stats.json" {
		t.Fatalf("state_file_replaced for %q, want queue.json then stats.json", files)
	}
}
