// Package signals gives a CLI a context that SIGINT, SIGTERM and SIGHUP
// cancel, without paying for their registration on calls that never wait.
//
// Registering a signal with os/signal starts the runtime's signal thread
// and is a round trip with it, which a call that never waits would pay
// for nothing (what it costs: docs/FAST-PATHS.md). A call that does not
// wait never looks at its context (a mutation holds its guard briefly
// and is never abandoned half done), so the registration is made only
// when something asks the context whether it is done: a wait, or a retry
// of a busy guard. Until then:
//
//   - before the CLI touches anything (parsing its command line, finding
//     the store), a signal has its default action: it ends the process,
//     and the call, before anything was changed;
//   - from [Lazy.Hold], which the CLI calls just before it touches the
//     store, the signals are ignored, so that a call that never waits
//     completes as it did when the signals were registered first and
//     their cancellation went unread;
//   - once the context is asked ([context.Context.Done] or Err), the
//     signals are registered and the first one cancels the context.
package signals

import (
	"context"
	"os"
	"os/signal"
	"sync"
)

// Lazy is a context cancelled by signals that are registered on first
// use of the context.
type Lazy struct {
	mu     sync.Mutex
	sigs   []os.Signal
	held   bool
	armed  bool
	ctx    context.Context
	cancel context.CancelFunc
}

// New returns a Lazy for sigs. Nothing is registered yet.
func New(sigs ...os.Signal) *Lazy {
	ctx, cancel := context.WithCancel(context.Background())
	return &Lazy{sigs: sigs, ctx: ctx, cancel: cancel}
}

// Context is cancelled by the first of the signals that arrives after it
// was first asked whether it is done.
func (l *Lazy) Context() context.Context { return lazyContext{l.ctx, l} }

// Hold makes the signals ignored until the context is first used (then
// they cancel it); a call for which nothing ever waits then runs to its
// end, as it did when a signal only cancelled a context it never read.
// Call it just before touching anything a signal must not interrupt
// half way. It does nothing once the signals are registered.
func (l *Lazy) Hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.armed && !l.held {
		signal.Ignore(l.sigs...)
		l.held = true
	}
}

// Arm registers the signals now (it is what the first use of the context
// does).
func (l *Lazy) Arm() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.armed {
		return
	}
	l.armed = true
	c := make(chan os.Signal, 1)
	// Never unregistered: the process exits with them registered, which
	// saves the round trips again.
	signal.Notify(c, l.sigs...)
	go func() {
		<-c
		l.cancel()
	}()
}

// lazyContext is l.ctx, armed by its first Done or Err.
type lazyContext struct {
	context.Context
	l *Lazy
}

func (c lazyContext) Done() <-chan struct{} {
	c.l.Arm()
	return c.Context.Done()
}

func (c lazyContext) Err() error {
	c.l.Arm()
	return c.Context.Err()
}
