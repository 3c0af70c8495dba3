package dirpool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-lease/durable-lease/pool"
)

// TestLogRotates: a pool.log past logRotateBytes becomes pool.log.1 at
// the next line, so the log stays bounded, and Log (and history) read
// both generations in order.
func TestLogRotates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	tp.mustAcquire(t, "ci-a") // creates pool.log
	path := filepath.Join(tp.Dir(), pool.LogFile)
	old := strings.Repeat(`{"at":"2026-01-01T00:00:00.000Z","event":"filler"}`+"\n", logRotateBytes/50+1)
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, dirStateOf(tp.Pool).AppendLog(ctx, []byte(`{"at":"2026-01-01T00:00:01.000Z","event":"after"}`)))
	fi, err := os.Stat(path)
	if err != nil || fi.Size() > 200 {
		t.Fatalf("pool.log after rotation: %v, %v", fi, err)
	}
	if fi, err := os.Stat(path + ".1"); err != nil || fi.Size() != int64(len(old)) {
		t.Fatalf("pool.log.1: %v, %v", fi, err)
	}
	lines, err := tp.Log(ctx)
	if err != nil || len(lines) != logRotateBytes/50+2 || !strings.Contains(string(lines[len(lines)-1]), `"after"`) {
		t.Fatalf("Log: %d lines, last %s, %v", len(lines), lines[len(lines)-1], err)
	}
	// A second rotation replaces the older generation: two at most.
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, dirStateOf(tp.Pool).AppendLog(ctx, []byte(`{"at":"2026-01-01T00:00:02.000Z","event":"again"}`)))
	if lines, _ := tp.Log(ctx); len(lines) != logRotateBytes/50+2 {
		t.Fatalf("after a second rotation: %d lines", len(lines))
	}
}

// TestLogOverTheBoundSaysSo: a generation of pool.log over maxLogBytes (a
// log the Node tool let grow) is read from its end, and the pool's log
// says so, once, with its size and the bound, instead of history quietly
// covering less than the file holds.
func TestLogOverTheBoundSaysSo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var said bytes.Buffer
	tp := newTestPool(t, oneSlotPool, pool.Options{Log: &said})
	tp.mustAcquire(t, "ci-a") // creates the pool's directory and pool.log
	old := filepath.Join(tp.Dir(), pool.LogFile+".1")
	f, err := os.Create(old)
	if err != nil {
		t.Fatal(err)
	}
	first := `{"at":"2026-01-01T00:00:00.000Z","event":"first"}` + "\n"
	last := `{"at":"2026-01-01T00:00:01.000Z","event":"last"}` + "\n"
	size := int64(maxLogBytes + 1<<20)
	_, err = f.WriteString(first)
	if err == nil {
		_, err = f.WriteAt([]byte("\n"+last), size-int64(len(last))-1) // a sparse middle
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		lines, err := tp.Log(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var events []string
		for _, l := range lines {
			var ev struct{ Event string }
			if json.Unmarshal(l, &ev) == nil {
				events = append(events, ev.Event)
			}
		}
		if strings.Contains(strings.Join(events, " "), "first") || !strings.Contains(strings.Join(events, " "), "last") {
			t.Fatalf("events %v: want the end of pool.log.1, not its start", events)
		}
	}
	want := fmt.Sprintf("%s is %d bytes, over the 1 MiB (1048576 bytes) read bound: only its last 1 MiB (1048576 bytes) is read", old, size)
	if n := strings.Count(said.String(), want); n != 1 {
		t.Fatalf("the pool's log said it %d times, want once:\n%s", n, said.String())
	}
}
