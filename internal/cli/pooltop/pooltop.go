// Package pooltop is `pool top`: a live view of a pool on a terminal. It
// shows each slot with its state, holder, how long it has been held, its
// time to expiry, fence and token fingerprint (never the token) and its
// attributes; the queue with positions, waiters, how long they have waited
// and their ETAs; and the latest events of the pool's log. It redraws when
// the pool changes, woken by the change notifications waiters use
// ([pool.Pool.Watch]), re-reads the pool at a fallback interval, and
// redraws every second so that times count down.
//
// It is linked into cmd/durable-lease-top alone, with the terminal UI
// library (bubbletea, lipgloss): pool hands `pool top` to that executable,
// so no other pool call pays for its start-up.
package pooltop

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// Options are the view's settings.
type Options struct {
	// Interval is how often the pool is re-read when no change
	// notification came (default 2s).
	Interval time.Duration
}

// maxEvents is how many of the log's last lines a reading keeps: more
// than any window shows.
const maxEvents = 200

// coalesce is how long the view waits after a notification before it
// reads, so that the several changes of one operation (a grant renames
// the queue and writes the slot record) make one redraw.
const coalesce = 20 * time.Millisecond

// Run shows the live view of p on the terminal (stdin and stdout) until
// the user presses q, Esc or Ctrl-C (nil), or ctx ends (ctx's error). The
// terminal is restored either way: the view draws on the alternate
// screen.
func Run(ctx context.Context, p *pool.Pool, opts Options) error {
	if opts.Interval <= 0 {
		opts.Interval = 2 * time.Second
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clk := &poolClock{now: p.Store().Now}
	m := newModel(newStyles(lipgloss.NewRenderer(os.Stdout)), p.Config().Name, opts.Interval, clk.read)
	// The caller's context carries the signals (SIGINT, SIGTERM, SIGHUP);
	// in raw mode Ctrl-C is a key.
	prog := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx), tea.WithoutSignalHandler())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		follow(ctx, p, opts.Interval, clk, func(msg tea.Msg) { prog.Send(msg) })
	}()
	_, err := prog.Run()
	cancel()
	wg.Wait()
	if perr := parent.Err(); perr != nil {
		return perr // a signal: the CLI says "interrupted"
	}
	if err != nil {
		return fmt.Errorf("pool top: %w", err)
	}
	return nil
}

// poolClock is the pool's clock as of the last reading (a test build's
// store may run on another clock than the wall), advanced by the wall
// clock between readings, so that times count down between them.
type poolClock struct {
	now func() time.Time

	mu     sync.Mutex
	offset time.Duration
}

// sync takes the pool clock's reading now.
func (c *poolClock) sync() time.Time {
	t := c.now()
	c.mu.Lock()
	c.offset = time.Until(t)
	c.mu.Unlock()
	return t
}

func (c *poolClock) read() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// readMsg is one reading of the pool, or why it failed.
type readMsg struct {
	snap *snapshot
	err  error
	at   time.Time
}

// follow reads p and sends each reading, then waits for a change
// notification, the interval or the next expiry of a held slot, until ctx
// ends.
func follow(ctx context.Context, p *pool.Pool, interval time.Duration, clk *poolClock, send func(tea.Msg)) {
	w, stop := p.Watch(ctx)
	defer stop()
	w.Listen(true) // every slot's changes, not only releases
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		r := read(ctx, p, clk)
		send(r)
		t.Reset(nextRead(r, interval))
		select {
		case <-ctx.Done():
			return
		case <-w.Slots:
		case <-w.Queue:
		case <-t.C:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(coalesce):
		}
		drain(w.Slots)
		drain(w.Queue)
	}
}

func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// read takes one reading: the status and the end of the log.
func read(ctx context.Context, p *pool.Pool, clk *poolClock) readMsg {
	st, err := p.Status(ctx)
	at := clk.sync()
	if err != nil {
		return readMsg{err: err, at: at}
	}
	log, err := p.Log(ctx)
	if err != nil {
		return readMsg{err: err, at: at}
	}
	snap := &snapshot{status: st, logLen: len(log), at: at}
	for _, line := range log[max(0, len(log)-maxEvents):] {
		snap.events = append(snap.events, parseEvent(line))
	}
	return readMsg{snap: snap, at: at}
}

// nextRead is how long until the next reading without a notification:
// the interval, or less when a held slot's lease expires sooner (nothing
// is written when a lease lapses, so no notification says so).
func nextRead(r readMsg, interval time.Duration) time.Duration {
	if r.snap == nil {
		return interval
	}
	next := interval
	for _, sl := range r.snap.status.Slots {
		if sl.State != lease.Held || sl.ExpiresAt == "" {
			continue
		}
		if exp, err := lease.ParseTime(sl.ExpiresAt); err == nil {
			if left := exp.Sub(r.at); left >= 0 {
				next = min(next, left+expirySlack)
			}
		}
	}
	return next
}

// expirySlack is how long after a lease's expiry the view reads it again:
// a little later than the expiry, so that the reading sees it lapsed.
const expirySlack = 50 * time.Millisecond
