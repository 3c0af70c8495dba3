package poolcli

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
	"github.com/durable-lease/durable-lease/internal/cli/storeopen"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// TopHelper is the executable that serves the top verb: the terminal UI
// library behind the live view is linked into it alone, so that it costs
// no other pool call its start-up time (docs/PERFORMANCE.md).
const TopHelper = "durable-lease-top"

// TopOptions are the top verb's settings, passed to [Top].
type TopOptions struct {
	// Interval is how often the view re-reads the pool when no change
	// notification woke it.
	Interval time.Duration
}

// Top runs the live view of p on the terminal until the user leaves it
// or ctx ends. It is nil in every executable but durable-lease-top, which
// sets it before calling [Main]; where it is nil, the top verb hands its
// command line to durable-lease-top, as an etcd:// store is handed to
// durable-lease-etcd.
var Top func(ctx context.Context, p *pool.Pool, opts TopOptions) error

type topCmd struct {
	Interval time.Duration `default:"2s" placeholder:"DUR" help:"Re-read the pool at least this often (it also redraws at once on every change it is notified of, and every second as times count down)."`
}

// isTerminal reports whether the view can run: it reads keys from stdin
// and draws on stdout.
var isTerminal = func() bool {
	return term.IsTerminal(int(os.Stdin.Fd())) && term.IsTerminal(int(os.Stdout.Fd()))
}

func (c *topCmd) Run(e *env) error {
	if c.Interval < 100*time.Millisecond || c.Interval > time.Hour {
		return cliparse.Usagef("--interval must be between 100ms and 1h (got %s)", c.Interval)
	}
	if !isTerminal() {
		return cliparse.Usagef("pool top is a live view for a terminal, and stdin or stdout is not one; for a script, use 'pool status' (one JSON object)")
	}
	if Top == nil {
		return handOffTop(e.args)
	}
	// This executable serves directory and etcd:// stores. Another scheme
	// would be handed to its own helper, whose pool has no live view and
	// would hand the command line back here: refuse instead of looping.
	if where, err := dirstore.ResolveStore(e.g.Store, "", e.cwd); err == nil && !storeopen.Served(where) {
		return fmt.Errorf("%w: pool top serves directory and etcd:// stores, not %s",
			lease.ErrInvalid, storeopen.Redact(where))
	}
	p, err := e.openRead()
	if err != nil {
		return err
	}
	return Top(e.ctx, p, TopOptions{Interval: c.Interval})
}

// handOffTop replaces this process with durable-lease-top, running
// "durable-lease-top pool ARGS..." with the same environment, descriptors
// (the terminal) and process id. It returns only on failure.
func handOffTop(args []string) error {
	path, ok := storeopen.Beside(TopHelper)
	if !ok {
		return cliparse.Usagef("pool top runs in %s, which is not installed at %s; "+
			"install it with the other commands: CGO_ENABLED=0 go install ./cmd/... in a clone", TopHelper, path)
	}
	argv := append([]string{path, "pool"}, args...)
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return fmt.Errorf("pool top: run %s: %w", path, err)
	}
	return nil // not reached
}
