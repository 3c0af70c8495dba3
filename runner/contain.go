package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/cgroup"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/provision"
	"golang.org/x/sys/unix"
)

// How a run's work is held (Options.Containment).
const (
	// ContainAuto is a cgroup of the run's own where one can be made, else
	// the guardian's process tree. The default.
	ContainAuto = "auto"
	// ContainCgroup requires a cgroup: a run that cannot make one fails
	// before anything is acquired.
	ContainCgroup = "cgroup"
	// ContainTree is the guardian's process tree alone (the subreaper
	// below pool-run), as on systems without cgroup v2.
	ContainTree = "tree"
)

// ErrContainment reports a run that asked for a cgroup ([ContainCgroup])
// where none can be made; nothing was acquired.
var ErrContainment = errors.New("runner: no cgroup for the work")

// Containment says how a run holds its work: in a cgroup of its own, or
// as the guardian's process tree, and why.
type Containment struct {
	// Kind is "cgroup" or "tree".
	Kind string `json:"kind"`
	// Cgroup is the run's cgroup directory (for a run that made one) or
	// the parent it would be made in (for [Explain]).
	Cgroup string `json:"cgroup,omitempty"`
	// Why says what decided it: a cgroup's parent, or why none could be
	// made.
	Why string `json:"why"`
	// PidsMax is the run's pids.max, 0 when none was set.
	PidsMax int64 `json:"pidsMax,omitempty"`
}

// contained is a run's containment while it runs.
type contained struct {
	Containment
	cg    *cgroup.Group // nil for the tree
	leafs int           // the cgroups made below it for commands
}

// killWait bounds the wait for a cgroup to empty once killed: SIGKILL
// lands within milliseconds unless a process is stuck in the kernel.
const killWait = 5 * time.Second

// pidsHeadroom is how many tasks (processes and threads) a run's
// pids.max leaves below the limits above it, for pool-run and its
// guardian (each a Go program of a few threads) to act when the work
// forks all it can.
const pidsHeadroom = 64

// Explain says how a run with o would hold its work, making nothing; the
// error of a run that could not start (an invalid containment, a cgroup
// asked for where none can be made).
func Explain(o Options) (Containment, error) {
	return decide(&o)
}

// decide picks the containment and the cgroup parent.
func decide(o *Options) (Containment, error) {
	mode := o.Containment
	if mode == "" {
		mode = ContainAuto
	}
	switch mode {
	case ContainTree:
		return Containment{Kind: ContainTree, Why: "asked for (containment tree)"}, nil
	case ContainAuto, ContainCgroup:
	default:
		return Containment{}, fmt.Errorf("%w: containment %q: want auto, cgroup or tree", ErrInvalid, mode)
	}
	parent, why, err := cgroupParent(o.CgroupParent)
	if err == nil {
		err = canStartInto(parent)
	}
	if err == nil {
		return Containment{Kind: ContainCgroup, Cgroup: parent, Why: why}, nil
	}
	if mode == ContainCgroup {
		return Containment{}, fmt.Errorf("%w: %v", ErrContainment, err)
	}
	return Containment{Kind: ContainTree, Why: "no cgroup: " + err.Error()}, nil
}

// cgroupParent is where a run's cgroup is made: the parent named, else
// pool-run's own cgroup when this user may make cgroups below it and move
// processes into them (root; a delegated subtree, as systemd gives a
// user's manager and its scopes).
func cgroupParent(named string) (dir, why string, err error) {
	if named != "" {
		g, err := cgroup.OpenDir(named)
		if err != nil {
			return "", "", fmt.Errorf("cgroup parent %s: %v", named, err)
		}
		dir = g.Dir()
		g.Close()
		if !cgroup.Writable(dir) {
			return "", "", fmt.Errorf("cgroup parent %s is not writable by this user", dir)
		}
		// A process moves (or starts) from pool-run's cgroup into one below
		// the parent only with write access to the cgroup.procs of their
		// common ancestor.
		if m, err := cgroup.Mount(); err == nil {
			if own, err := cgroup.Own(); err == nil {
				if common := commonAncestor(filepath.Join(m, own), dir); !cgroup.Writable(common) {
					return "", "", fmt.Errorf("cgroup parent %s: this user may not move processes there from pool-run's own cgroup (the common ancestor %s is not writable)", dir, common)
				}
			}
		}
		return dir, "the cgroup parent named", nil
	}
	m, err := cgroup.Mount()
	if err != nil {
		return "", "", err
	}
	own, err := cgroup.Own()
	if err != nil {
		return "", "", err
	}
	dir = filepath.Join(m, own)
	if !cgroup.Writable(dir) {
		return "", "", fmt.Errorf("pool-run's own cgroup %s is not writable by this user (no delegated subtree; see docs/POOL-RUN.md)", dir)
	}
	return dir, "pool-run's own cgroup", nil
}

// contain makes the run's cgroup (or settles for the tree) before
// anything is acquired. label names the run in the cgroup's name.
func contain(o *Options, label string) (*contained, error) {
	c, err := decide(o)
	if err != nil {
		return nil, err
	}
	if c.Kind == ContainTree {
		return &contained{Containment: c}, nil
	}
	sweepRuns(c.Cgroup)
	g, err := cgroup.Create(c.Cgroup, runName(label))
	if err != nil {
		if o.Containment == ContainCgroup {
			return nil, fmt.Errorf("%w: %v", ErrContainment, err)
		}
		return &contained{Containment: Containment{Kind: ContainTree, Why: "no cgroup: " + err.Error()}}, nil
	}
	c.Cgroup = g.Dir()
	if g.HasPids() {
		left, limited := cgroup.PidsLimit(filepath.Dir(g.Dir()))
		if n := pidsBudget(left, limited, nprocLimit()); n > 0 && g.SetPidsMax(n) == nil {
			c.PidsMax = n
		}
	}
	return &contained{Containment: c, cg: g}, nil
}

// pidsBudget is the pids.max of a run: what the hierarchy above it
// (left, when limited) and the user's process limit (nproc, 0 for none)
// still allow, less pidsHeadroom; 0 when there is no limit to stay under
// or too little room for one to help.
func pidsBudget(left int64, limited bool, nproc int64) int64 {
	budget := int64(-1)
	if limited {
		budget = left
	}
	if nproc > 0 && os.Geteuid() != 0 && (budget < 0 || nproc < budget) { // root's processes are not counted against it
		budget = nproc
	}
	if budget < 0 {
		return 0
	}
	if budget -= pidsHeadroom; budget < 8 {
		return 0
	}
	return budget
}

// cgroupLabel is label as a cgroup name may hold it.
func cgroupLabel(label string) string {
	var b strings.Builder
	for _, r := range label {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 64 {
			break
		}
	}
	if b.Len() == 0 {
		return "run"
	}
	return b.String()
}

// work is what the lease's record names of the containment.
func (c *contained) work() *lease.Work {
	if c == nil || c.cg == nil {
		return nil
	}
	r := c.cg.Ref()
	return lease.WorkOn(r.Path, r.ID, cgroup.Namespace())
}

// bind binds the cgroup to the incarnation of the lease just acquired
// (lease.WorkBinding), before anything starts in it: only then will whoever
// takes the lease over end what is left in it. A cgroup that cannot be
// bound (no extended attributes) still holds the work; the run says so.
func (c *contained) bind(rec *lease.Record, log func(string, ...any)) {
	if c == nil || c.cg == nil {
		return
	}
	if err := c.cg.Bind(lease.WorkBinding(rec.Kind, rec.Token)); err != nil {
		c.Why += "; not bound to the lease, so a successor will not end what it leaves: " + err.Error()
		log("pool-run: warning: the run's cgroup could not be bound to its lease (%v); a successor will not end what it leaves\n", err)
	}
}

// fd is the cgroup's directory descriptor, -1 for the tree.
func (c *contained) fd() int {
	if c == nil || c.cg == nil {
		return -1
	}
	return c.cg.FD()
}

// kill ends every process of the cgroup at once (no grace: a loss).
func (c *contained) kill() {
	if c != nil && c.cg != nil {
		_ = c.cg.Kill()
	}
}

// populated reports whether any process is left in the cgroup; false for
// the tree, which the guardian follows.
func (c *contained) populated() bool {
	if c == nil || c.cg == nil {
		return false
	}
	p, err := c.cg.Populated()
	return p || err != nil && !errors.Is(err, cgroup.ErrNotFound)
}

// end kills what is left in the cgroup and waits until it is empty.
func (c *contained) end() error {
	if c == nil || c.cg == nil || !c.populated() {
		return nil
	}
	return c.cg.End(killWait)
}

// close ends what is left, removes the cgroup and closes it: after the
// work, before the release, and on every path where the lease was not
// taken. It reports whether the cgroup was gone already: removed by
// whoever ended the work to take the lease (see lease.Work), since only
// this close removes it while pool-run runs.
func (c *contained) close(log func(format string, args ...any)) (endedByOther bool) {
	if c == nil || c.cg == nil {
		return false
	}
	endedByOther = c.endedByOther()
	// Ended here in any case: a successor that marked the cgroup and died
	// (or failed to empty it) leaves it to its holder, which still may
	// hold the lease.
	if err := c.end(); err != nil {
		log("pool-run: the work's cgroup %s: %v\n", c.cg.Dir(), err)
	}
	if err := c.cg.Remove(); err != nil {
		log("pool-run: removing the work's cgroup: %v\n", err)
	}
	_ = c.cg.Close()
	c.cg = nil
	return endedByOther
}

// endedByOther reports whether the run's cgroup is being ended, or was,
// by someone else: whoever takes the lease from this run marks the cgroup
// (cgroup.EndedMark), freezes it and kills what is in it, and once it is
// empty removes the mark and then the cgroup (see lease.Work); pool-run
// and its guardian do none of that while they run. Frozen counts: between
// the removal of the mark and that of the cgroup, the freeze is all that
// says so, and the guardian thaws what it froze itself (a job-control
// stop) before it reports the work gone.
func (c *contained) endedByOther() bool {
	if c == nil || c.cg == nil {
		return false
	}
	if c.cg.Marked(cgroup.EndedMark) {
		return true
	}
	frozen, err := c.cg.Frozen() // its own freeze, not a slice's above it
	return frozen && err == nil || errors.Is(err, cgroup.ErrNotFound)
}

// withCgroup is ctx for the pool's provision, reset and health commands,
// which run in the run's cgroup too, in a cgroup of their own below it
// (see cgroup.Group.Sub); done closes it once they have run.
func (c *contained) withCgroup(ctx context.Context) (_ context.Context, done func()) {
	if c == nil || c.cg == nil {
		return ctx, func() {}
	}
	c.leafs++
	leaf, err := c.cg.Sub("provision-" + strconv.Itoa(c.leafs))
	if err != nil {
		// The commands then run in the run's cgroup itself, as long as
		// it was never killed; the lease's record names it either way.
		return provision.InCgroup(ctx, c.cg.FD()), func() {}
	}
	return provision.InCgroup(ctx, leaf.FD()), func() { leaf.Close() }
}

// logf writes to w, for contained.close.
func logf(w interface{ Write([]byte) (int, error) }) func(string, ...any) {
	return func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
}

// nprocLimit is the user's soft process limit (RLIMIT_NPROC), 0 for none.
func nprocLimit() int64 {
	var r unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NPROC, &r) != nil || uint64(r.Cur) >= 1<<40 {
		return 0 // unreadable, or as good as infinite
	}
	return int64(r.Cur)
}

// commonAncestor is the deepest directory above or at both a and b.
func commonAncestor(a, b string) string {
	as, bs := strings.Split(filepath.Clean(a), "/"), strings.Split(filepath.Clean(b), "/")
	n := 0
	for n < len(as) && n < len(bs) && as[n] == bs[n] {
		n++
	}
	if n <= 1 {
		return "/"
	}
	return strings.Join(as[:n], "/")
}

// runName is the name of a run's cgroup: the kind or pool, and who made
// it (pid and start time), so that a run that died before removing its
// empty cgroup is told from one that lives (sweepRuns).
func runName(label string) string {
	start := uint64(0)
	if st, err := selfStart(); err == nil {
		start = st
	}
	return fmt.Sprintf("pool-run-%s-%d-%d-%s", cgroupLabel(label), os.Getpid(), start, lease.RandomHex(4))
}

// sweepRuns removes the empty run cgroups in parent whose pool-run is
// gone (killed while it waited in a queue, say). One with processes left
// is not this run's to end: the lease its record names is, for whoever
// takes it over (lease.Work).
func sweepRuns(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, "pool-run-") {
			continue
		}
		f := strings.Split(name, "-")
		if len(f) < 6 {
			continue
		}
		pid, err1 := strconv.Atoi(f[len(f)-3])
		start, err2 := strconv.ParseUint(f[len(f)-2], 10, 64)
		if err1 != nil || err2 != nil || processLives(pid, start) {
			continue
		}
		g, err := cgroup.OpenDir(filepath.Join(parent, name))
		if err != nil {
			continue
		}
		if p, err := g.Populated(); err == nil && !p {
			_ = g.Remove()
		}
		g.Close()
	}
}
