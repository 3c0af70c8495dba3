package lease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/internal/cgroup"
)

// endWait bounds the wait for a predecessor's cgroup to empty after
// cgroup.kill: SIGKILL takes effect within milliseconds unless a process
// is stuck in the kernel (uninterruptible sleep on a dead mount), which
// nothing can end sooner, and the lease is then not handed on.
const endWait = 5 * time.Second

// cgroupEnder ends a predecessor's work through its cgroup.
type cgroupEnder struct{}

func defaultEnder() workEnder { return cgroupEnder{} }

// open opens w's cgroup if it is on this host and still the one named:
// nil otherwise (another host, another boot, removed, made again), and
// nil when this process runs inside it: the holder's own work changing
// its own lease (a phase releasing it) is not ended by itself, which
// would freeze and kill the very process that asks; its pool-run sees
// the loss and ends the rest.
func (cgroupEnder) open(w *Work) (*cgroup.Group, error) {
	if w.Boot != kernelBootID() {
		return nil, nil
	}
	if own, err := cgroup.Own(); err == nil && (own == w.Cgroup || strings.HasPrefix(own, w.Cgroup+"/")) {
		return nil, nil
	}
	g, err := cgroup.Open(cgroup.Ref{Path: w.Cgroup, ID: w.ID})
	if errors.Is(err, cgroup.ErrNotFound) || errors.Is(err, cgroup.ErrUnsupported) {
		return nil, nil
	}
	return g, err
}

// belongs reports whether the cgroup g is the record's: made by the user
// who wrote the record, when the store knows that user. A record planted
// by another user cannot make anyone end a cgroup of a third party's.
func belongs(g *cgroup.Group, writer *uint32) bool {
	return writer == nil || g.UID() == *writer
}

func (e cgroupEnder) Running(w *Work, writer *uint32) (bool, error) {
	g, err := e.open(w)
	if g == nil || err != nil {
		return false, err
	}
	defer g.Close()
	if !belongs(g, writer) {
		return false, nil
	}
	return g.Populated()
}

func (e cgroupEnder) End(_ context.Context, w *Work, writer *uint32) (int, error) {
	g, err := e.open(w)
	if g == nil || err != nil {
		return 0, err
	}
	defer g.Close()
	if !belongs(g, writer) {
		return 0, nil
	}
	if writer == nil && g.UID() != uint32(os.Geteuid()) {
		// Nothing says who wrote this record (a store of another host's
		// kind): only the cgroup's owner may act on it.
		return 0, fmt.Errorf("its cgroup %s belongs to uid %d, and this store cannot say who named it; that user (or the operator) must end it", g.Dir(), g.UID())
	}
	procs, _ := g.Procs()
	// Marked first: the holder's own processes, seeing the work die, then
	// know it was ended for a successor, not by itself.
	_ = g.Mark(cgroup.EndedMark)
	if err := g.End(endWait); err != nil {
		if errors.Is(err, cgroup.ErrDenied) {
			return 0, fmt.Errorf("its cgroup %s belongs to uid %d, which this user cannot end: %w", g.Dir(), g.UID(), err)
		}
		return 0, err
	}
	_ = g.Remove()
	return len(procs), nil
}

func hostBootID() string { return kernelBootID() }
