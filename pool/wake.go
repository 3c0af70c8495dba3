//go:build !linux

package pool

import (
	"context"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// watch returns the waiter's wakeups, with fsnotify (Linux has its own,
// with a narrower event mask: wake_linux.go). It never fails: without events
// (the directories cannot be watched) the channels stay silent and waiters
// poll. stop releases the watcher (in the background).
func (p *Pool) watch(ctx context.Context) (wakeups, func()) {
	slots, queue := make(chan struct{}, 1), make(chan struct{}, 1)
	wk := wakeups{slots: slots, queue: queue, listen: func(bool) {}}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return wk, func() {}
	}
	queueName := filepath.Join(p.dir, QueueFile)
	names := map[string]chan struct{}{queueName: queue}
	for _, s := range p.cfg.Slots {
		names[filepath.Join(p.store.Dir(), s.Kind+".json")] = slots
	}
	signal := func(ch chan struct{}) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	// Both directories must exist to be watched; creating them is harmless
	// (every waiter writes there right after).
	_ = p.ensureDir(p.dir)
	for _, d := range []string{p.store.Dir(), p.dir} {
		if err := w.Add(d); err != nil {
			w.Close()
			return wk, func() {}
		}
	}
	var mu sync.Mutex
	watching := true
	wk.listen = func(on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on == watching {
			return
		}
		var err error
		if on {
			err = w.Add(p.store.Dir())
		} else {
			err = w.Remove(p.store.Dir())
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
