package dirpool

import (
	"context"
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
