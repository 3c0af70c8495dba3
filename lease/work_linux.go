package lease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/cgroup"
)

// endWait bounds the wait for a predecessor's cgroup to empty after
// cgroup.kill: SIGKILL takes effect within milliseconds unless a process
// is stuck in the kernel (uninterruptible sleep on a dead mount), which
// nothing can end sooner, and the lease is then not handed on.
const endWait = 5 * time.Second

// cgroupEnder ends a predecessor's work through its cgroup.
type cgroupEnder struct{}

func defaultEnder() workEnder { return cgroupEnder{} }

// errOtherNamespace refuses a change whose record names a cgroup of
// another cgroup namespace, which only root can reach (by its id).
var errOtherNamespace = errors.New("its cgroup is in another cgroup namespace, whose paths do not name it here; only root can reach it by its id")

// open opens w's cgroup if it is on this host and still the one named:
// nil otherwise (another host, another boot, removed, made again), and
// nil when this process runs inside it: the holder's own work changing
// its own lease (a phase releasing it) is not ended by itself, which
// would freeze and kill the very process that asks; its pool-run sees
// the loss and ends the rest. A cgroup of another cgroup namespace is
// opened by its id, which needs root; others get errOtherNamespace.
func (cgroupEnder) open(w *Work) (*cgroup.Group, error) {
	if w.Boot != kernelBootID() {
		return nil, nil
	}
	var g *cgroup.Group
	var err error
	if w.NS != 0 && w.NS != cgroup.Namespace() {
		if os.Geteuid() != 0 {
			return nil, errOtherNamespace
		}
		g, err = cgroup.OpenID(w.ID)
	} else {
		if own, err := cgroup.Own(); err == nil && (own == w.Cgroup || strings.HasPrefix(own, w.Cgroup+"/")) {
			return nil, nil
		}
		g, err = cgroup.Open(cgroup.Ref{Path: w.Cgroup, ID: w.ID})
	}
	if errors.Is(err, cgroup.ErrNotFound) || errors.Is(err, cgroup.ErrUnsupported) {
		return nil, nil
	}
	return g, err
}

// belongs reports whether the cgroup g holds rec's work: bound to rec's
// very incarnation (cgroup.Group.Bind, which only who may write the cgroup
// can set: a record planted or rewritten by whoever can write the store
// cannot name another cgroup, nor another run's), and made by the user who
// wrote the record where the store knows that user, else by this one.
func belongs(g *cgroup.Group, rec *Record) bool {
	if g.Binding() != WorkBinding(rec.Kind, rec.Token) {
		return false
	}
	if rec.WriterUID != nil {
		return g.UID() == *rec.WriterUID
	}
	return g.UID() == uint32(os.Geteuid())
}

// Running reports a cgroup of rec's work still there: populated, or
// empty but where its holder could still start processes (between two
// gate phases), which the successor fences by removing it.
func (e cgroupEnder) Running(w *Work, rec *Record) (bool, error) {
	g, err := e.open(w)
	if g == nil || err != nil {
		return false, err
	}
	defer g.Close()
	return belongs(g, rec), nil
}

func (e cgroupEnder) End(ctx context.Context, w *Work, rec *Record) (int, error) {
	g, err := e.open(w)
	if g == nil || err != nil {
		return 0, err
	}
	defer g.Close()
	if !belongs(g, rec) {
		return 0, nil
	}
	procs, _ := g.Procs()
	// Marked first: the holder's own processes, seeing the work die, then
	// know it was ended for a successor, not by itself.
	_ = g.Mark(cgroup.EndedMark)
	bound := endWait
	if dl, ok := ctx.Deadline(); ok {
		bound = min(bound, max(time.Until(dl), 0))
	}
	if err := g.End(bound); err != nil {
		if errors.Is(err, cgroup.ErrDenied) {
			return 0, fmt.Errorf("its cgroup %s belongs to uid %d, which this user cannot end: %w", g.Dir(), g.UID(), err)
		}
		return 0, err
	}
	// Removed, so that nothing more can start in it: a holder that has
	// not seen its loss yet fails to start its next phase there.
	if err := g.Remove(); err != nil {
		return 0, fmt.Errorf("its cgroup %s is empty but cannot be removed: %w", g.Dir(), err)
	}
	return len(procs), nil
}

func hostBootID() string { return kernelBootID() }
