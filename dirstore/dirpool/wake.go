//go:build !linux

package dirpool

import (
	"context"
	"path/filepath"
	"sync"

	"github.com/durable-lease/durable-lease/pool"
	"github.com/fsnotify/fsnotify"
)

// Watch returns the waiter's wake-ups, with fsnotify (Linux has its own,
// with a narrower event mask: wake_linux.go). It never fails: without events
// (the directories cannot be watched) the channels stay silent and waiters
// poll. stop releases the watcher (in the background).
func (d *dirState) Watch(ctx context.Context, slotKinds []string) (pool.Wakeups, func()) {
	slots, queue := make(chan struct{}, 1), make(chan struct{}, 1)
	wk := pool.Wakeups{Slots: slots, Queue: queue, Listen: func(bool) {}}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return wk, func() {}
	}
	queueName := d.queuePath()
	names := map[string]chan struct{}{queueName: queue}
	for _, kind := range slotKinds {
		names[filepath.Join(d.h.Store.Dir(), kind+".json")] = slots
	}
	signal := func(ch chan struct{}) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	// Both directories must exist to be watched; creating them is harmless
	// (every waiter writes there right after).
	_, _ = d.ensureDir(d.dir)
	for _, dir := range []string{d.h.Store.Dir(), d.dir} {
		if err := w.Add(dir); err != nil {
			w.Close()
			return wk, func() {}
		}
	}
	var mu sync.Mutex
	watching := true
	wk.Listen = func(on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on == watching {
			return
		}
		var err error
		if on {
			err = w.Add(d.h.Store.Dir())
		} else {
			err = w.Remove(d.h.Store.Dir())
		}
		if err == nil {
			watching = on
		} else if on {
			signal(slots) // not watched: the poll remains, and a re-check now
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if ch := names[ev.Name]; ch != nil && ev.Op&(fsnotify.Remove|fsnotify.Rename|fsnotify.Create|fsnotify.Write) != 0 {
					signal(ch)
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
				// An overflow may hide a release: wake and re-check.
				signal(slots)
				signal(queue)
			}
		}
	}()
	return wk, func() {
		cancel()
		<-done
		// fsnotify's Close waits for its reader goroutine, which took up to
		// 15 ms here; that wait would sit between a grant and its caller.
		go w.Close()
	}
}
