package pool_test

import (
	"context"
	"github.com/durable-lease/durable-lease/pool"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestPoolStaysInsideTheStore plants symlinks and FIFOs where the pool's
// state files and directories belong. The pool must never write, append,
// delete or block through them.
func TestPoolStaysInsideTheStore(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		plant func(t *testing.T, poolDir, outside string)
	}{
		{"grants dir is a symlink", func(t *testing.T, poolDir, outside string) {
			must(t, os.Symlink(outside, filepath.Join(poolDir, pool.GrantsDir)))
		}},
		{"pool.log is a symlink", func(t *testing.T, poolDir, outside string) {
			must(t, os.Symlink(filepath.Join(outside, "victim.txt"), filepath.Join(poolDir, pool.LogFile)))
		}},
		{"queue.json is a symlink", func(t *testing.T, poolDir, outside string) {
			must(t, os.Symlink(filepath.Join(outside, "victim.txt"), filepath.Join(poolDir, pool.QueueFile)))
		}},
		{"queue.json is a FIFO", func(t *testing.T, poolDir, outside string) {
			must(t, syscall.Mkfifo(filepath.Join(poolDir, pool.QueueFile), 0o666))
		}},
		{"stats.json is a FIFO", func(t *testing.T, poolDir, outside string) {
			must(t, syscall.Mkfifo(filepath.Join(poolDir, pool.StatsFile), 0o666))
		}},
		{"an older version's lock file is a symlink", func(t *testing.T, poolDir, outside string) {
			must(t, os.Symlink(filepath.Join(outside, "victim.txt"), filepath.Join(poolDir, ".queue.flock")))
		}},
		{"the pool directory is a symlink", func(t *testing.T, poolDir, outside string) {
			must(t, os.Remove(poolDir))
			must(t, os.Symlink(outside, poolDir))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := newTestPool(t, oneSlotPool, pool.Options{})
			outside := t.TempDir()
			victim := filepath.Join(outside, "victim.txt")
			old := filepath.Join(outside, "old-file.json")
			must(t, os.WriteFile(victim, []byte("precious\n"), 0o600))
			must(t, os.WriteFile(old, []byte("{}"), 0o600))
			past := time.Now().Add(-48 * time.Hour)
			must(t, os.Chtimes(old, past, past))
			must(t, os.MkdirAll(tp.Dir(), 0o777))
			tt.plant(t, tp.Dir(), outside)

			done := make(chan struct{})
			go func() {
				defer close(done)
				if g, err := tp.Acquire(t.Context(), pool.AcquireRequest{Owner: "ci", NoWait: true}); err == nil {
					_, _ = tp.Release(t.Context(), "1", g.Owner, g.Token, false)
				}
				_, _ = tp.Status(context.Background())
			}()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Fatal("the pool hangs on a planted file")
			}
			if b, err := os.ReadFile(victim); err != nil || string(b) != "precious\n" {
				t.Errorf("a file outside the store was changed: %q, %v", b, err)
			}
			if _, err := os.Stat(old); err != nil {
				t.Errorf("an old file outside the store was deleted: %v", err)
			}
			entries, _ := os.ReadDir(outside)
			if len(entries) != 2 {
				t.Errorf("files were written outside the store: %v", entries)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
