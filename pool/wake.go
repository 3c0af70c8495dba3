package pool

import (
	"context"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// watch returns a channel that receives a value soon after a slot lease
// file or the queue changes, so a waiter re-checks within milliseconds of a
// release instead of at its next poll. It never fails: without events
// (the directories cannot be watched) the channel stays silent and waiters
// poll. stop releases the watcher (in the background).
func (p *Pool) watch(ctx context.Context) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return ch, func() {}
	}
	names := map[string]bool{filepath.Join(p.dir, QueueFile): true}
	for _, s := range p.cfg.Slots {
		names[filepath.Join(p.store.Dir(), s.Kind+".json")] = true
	}
	// Both directories must exist to be watched; creating them is harmless
	// (every waiter writes there right after).
	_ = p.ensureDir(p.dir)
	for _, d := range []string{p.store.Dir(), p.dir} {
		if err := w.Add(d); err != nil {
			w.Close()
			return ch, func() {}
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
				if names[ev.Name] && ev.Op&(fsnotify.Remove|fsnotify.Rename|fsnotify.Create|fsnotify.Write) != 0 {
					select {
					case ch <- struct{}{}:
					default:
					}
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
				// An overflow may hide a release: wake and re-check.
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	}()
	return ch, func() {
		cancel()
		<-done
		// fsnotify's Close waits for its reader goroutine, which took up to
		// 15 ms here; that wait would sit between a grant and its caller.
		go w.Close()
	}
}
