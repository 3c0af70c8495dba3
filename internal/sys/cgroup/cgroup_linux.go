package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// mount is the hierarchy's mount point, read once per process.
var mount = sync.OnceValues(func() (string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	return mountPoint(data)
})

// Mount is where the cgroup v2 hierarchy is mounted.
func Mount() (string, error) { return mount() }

// Own is this process's cgroup: its path in the hierarchy.
func Own() (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	return ownPath(data)
}

// Of is the cgroup of process pid, "" when it is gone.
func Of(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	p, _ := ownPath(data)
	return p
}

// DirOf is the directory of the cgroup at path in the hierarchy.
func DirOf(path string) (string, error) {
	m, err := mount()
	if err != nil {
		return "", err
	}
	clean := filepath.Clean("/" + path)
	if clean != path && clean+"/" != path {
		return "", fmt.Errorf("%w: %q is not a clean cgroup path", ErrNotFound, path)
	}
	return filepath.Join(m, clean), nil
}

// Writable reports whether this user may make a cgroup in the cgroup
// directory dir and move processes from dir into it: dir and its
// cgroup.procs are writable (root; the owner of a delegated subtree).
func Writable(dir string) bool {
	return unix.Access(dir, unix.W_OK|unix.X_OK) == nil && unix.Access(filepath.Join(dir, "cgroup.procs"), unix.W_OK) == nil
}

// Group is an open cgroup directory. Its methods act through the open
// descriptor, never by path: a cgroup removed and made again at the same
// path is never the one acted on.
type Group struct {
	ref Ref
	dir string
	fd  int
	uid uint32
}

// Create makes the cgroup name in the cgroup directory parent and opens
// it. The name must be new there.
func Create(parent, name string) (*Group, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("cgroup: %q is not a valid name for a cgroup", name)
	}
	m, err := mount()
	if err != nil {
		return nil, err
	}
	parent = filepath.Clean(parent)
	if parent != m && !strings.HasPrefix(parent, m+"/") {
		return nil, fmt.Errorf("%w: %s is not in the cgroup v2 hierarchy (mounted at %s)", ErrNotFound, parent, m)
	}
	dir := filepath.Join(parent, name)
	if err := unix.Mkdir(dir, 0o755); err != nil {
		return nil, pathError("make", dir, err)
	}
	g, err := openDir(dir, m)
	if err != nil {
		_ = unix.Rmdir(dir)
		return nil, err
	}
	return g, nil
}

// Sub makes the cgroup name below g and opens it. A process started into
// a cgroup with clone3 must go into one that was not killed (cgroup.kill)
// since: the kernel kills such a child at once, so each start gets a
// cgroup of its own below the run's.
func (g *Group) Sub(name string) (*Group, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("cgroup: %q is not a valid name for a cgroup", name)
	}
	if err := unix.Mkdirat(g.fd, name, 0o755); err != nil {
		return nil, pathError("make", g.dir+"/"+name, err)
	}
	fd, err := unix.Openat(g.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathError("open", g.dir+"/"+name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, pathError("stat", g.dir+"/"+name, err)
	}
	p := g.ref.Path + "/" + name
	if g.ref.Path == "/" {
		p = "/" + name
	}
	return &Group{ref: Ref{Path: p, ID: st.Ino}, dir: g.dir + "/" + name, fd: fd, uid: st.Uid}, nil
}

// Open opens the cgroup r names, if it is still that one.
func Open(r Ref) (*Group, error) {
	m, err := mount()
	if err != nil {
		return nil, err
	}
	dir, err := DirOf(r.Path)
	if err != nil {
		return nil, err
	}
	g, err := openDir(dir, m)
	if err != nil {
		return nil, err
	}
	if g.ref.ID != r.ID {
		g.Close()
		return nil, fmt.Errorf("%w: %s is another cgroup now (id %d, not %d)", ErrNotFound, r.Path, g.ref.ID, r.ID)
	}
	return g, nil
}

// OpenDir opens the cgroup directory dir (an absolute path under the
// hierarchy's mount point).
func OpenDir(dir string) (*Group, error) {
	m, err := mount()
	if err != nil {
		return nil, err
	}
	return openDir(filepath.Clean(dir), m)
}

// FromFD is the cgroup whose directory descriptor fd was handed to this
// process (by a parent that opened it as dir); the Group owns fd.
func FromFD(fd int, dir string) (*Group, error) {
	m, err := mount()
	if err != nil {
		return nil, err
	}
	var fs unix.Statfs_t
	var st unix.Stat_t
	if err := unix.Fstatfs(fd, &fs); err != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return nil, fmt.Errorf("%w: descriptor %d is not a cgroup v2 directory", ErrNotFound, fd)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, pathError("stat", dir, err)
	}
	unix.CloseOnExec(fd)
	path := strings.TrimPrefix(dir, m)
	if path == "" {
		path = "/"
	}
	return &Group{ref: Ref{Path: path, ID: st.Ino}, dir: dir, fd: fd, uid: st.Uid}, nil
}

func openDir(dir, m string) (*Group, error) {
	if dir != m && !strings.HasPrefix(dir, m+"/") {
		return nil, fmt.Errorf("%w: %s is not in the cgroup v2 hierarchy (mounted at %s)", ErrNotFound, dir, m)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathError("open", dir, err)
	}
	var fs unix.Statfs_t
	var st unix.Stat_t
	if err := unix.Fstatfs(fd, &fs); err != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s is not a cgroup v2 directory", ErrNotFound, dir)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, pathError("stat", dir, err)
	}
	path := strings.TrimPrefix(dir, m)
	if path == "" {
		path = "/"
	}
	return &Group{ref: Ref{Path: path, ID: st.Ino}, dir: dir, fd: fd, uid: st.Uid}, nil
}

// pathError wraps a system call's error, as ErrDenied or ErrNotFound
// where it is one of those.
func pathError(op, path string, err error) error {
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS):
		return fmt.Errorf("%w: %s %s: %v", ErrDenied, op, path, err)
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ENODEV), errors.Is(err, unix.ESTALE):
		return fmt.Errorf("%w: %s %s: %v", ErrNotFound, op, path, err)
	}
	return &os.PathError{Op: op, Path: path, Err: err}
}

// bindingAttr is the extended attribute that binds a run's cgroup to the
// lease incarnation it runs for (see [Group.Bind]).
const bindingAttr = "user.durable-lease"

// Bind records on the cgroup which lease incarnation it holds the work of
// (its kind and token fingerprint). Only who may write the cgroup can set
// it, so a record naming a cgroup cannot make it the work of a lease it
// was not made for.
func (g *Group) Bind(binding string) error {
	if err := unix.Fsetxattr(g.fd, bindingAttr, []byte(binding), 0); err != nil {
		return pathError("bind", g.dir, err)
	}
	return nil
}

// Binding is what [Group.Bind] recorded, "" when nothing was.
func (g *Group) Binding() string {
	buf := make([]byte, 256)
	n, err := unix.Fgetxattr(g.fd, bindingAttr, buf)
	if err != nil || n < 0 {
		return ""
	}
	return string(buf[:n])
}

// Namespace is the cgroup namespace of this process (the inode of
// /proc/self/ns/cgroup): cgroup paths are relative to its root, so a path
// names one cgroup only among processes of the same namespace.
func Namespace() uint64 {
	var st unix.Stat_t
	if unix.Stat("/proc/self/ns/cgroup", &st) != nil {
		return 0
	}
	return st.Ino
}

// OpenID opens the cgroup whose id is id by its file handle (cgroup v2
// ids are their kernfs handles), whatever the cgroup namespace: a path
// of another namespace resolves to another cgroup, or none, here. It
// needs CAP_DAC_READ_SEARCH (root).
func OpenID(id uint64) (*Group, error) {
	m, err := mount()
	if err != nil {
		return nil, err
	}
	mfd, err := unix.Open(m, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathError("open", m, err)
	}
	defer unix.Close(mfd)
	var b [8]byte
	for i := range b {
		b[i] = byte(id >> (8 * i))
	}
	fd, err := unix.OpenByHandleAt(mfd, unix.NewFileHandle(fileIDKernfs, b[:]), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return nil, pathError("open by id", fmt.Sprint(id), err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Ino != id {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: cgroup id %d", ErrNotFound, id)
	}
	return &Group{ref: Ref{Path: fmt.Sprintf("(id %d)", id), ID: id}, dir: fmt.Sprintf("%s/(id %d)", m, id), fd: fd, uid: st.Uid}, nil
}

// fileIDKernfs is the file handle type of kernfs (cgroup v2) nodes.
const fileIDKernfs = 0xfe

// Ref names the cgroup.
func (g *Group) Ref() Ref { return g.ref }

// Dir is the cgroup's directory.
func (g *Group) Dir() string { return g.dir }

// FD is the open directory, as SysProcAttr.CgroupFD takes it: a child
// started with it (clone3 with CLONE_INTO_CGROUP) runs its first
// instruction inside the cgroup.
func (g *Group) FD() int { return g.fd }

// UID owns the cgroup's directory.
func (g *Group) UID() uint32 { return g.uid }

// Close closes the directory; the cgroup stays.
func (g *Group) Close() error {
	if g == nil || g.fd < 0 {
		return nil
	}
	err := unix.Close(g.fd)
	g.fd = -1
	return err
}

func (g *Group) read(name string) ([]byte, error) {
	fd, err := unix.Openat(g.fd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, pathError("open", g.dir+"/"+name, err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 256)
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= 1<<22 {
				return nil, fmt.Errorf("cgroup: %s/%s: over 4 MiB", g.dir, name)
			}
			buf = append(buf, make([]byte, len(buf))...)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, pathError("read", g.dir+"/"+name, err)
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

func (g *Group) write(name, value string) error {
	fd, err := unix.Openat(g.fd, name, unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return pathError("open", g.dir+"/"+name, err)
	}
	defer unix.Close(fd)
	for {
		_, err = unix.Write(fd, []byte(value))
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return pathError("write "+value+" to", g.dir+"/"+name, err)
	}
	return nil
}

// Events reads cgroup.events: whether any process is in the cgroup or
// below it, and whether it is frozen.
func (g *Group) Events() (populated, frozen bool, err error) {
	data, err := g.read("cgroup.events")
	if err != nil {
		return false, false, err
	}
	return parseEvents(data)
}

// Populated reports whether any process is left in the cgroup or below.
func (g *Group) Populated() (bool, error) {
	p, _, err := g.Events()
	return p, err
}

// Freeze stops every process of the cgroup, and every one that enters it
// later, until [Group.Thaw]; [Group.WaitFrozen] waits until the kernel
// says they are all stopped.
func (g *Group) Freeze() error { return g.write("cgroup.freeze", "1") }

// Thaw lets the processes of the cgroup run again.
func (g *Group) Thaw() error { return g.write("cgroup.freeze", "0") }

// Frozen reports whether the cgroup itself is asked to be frozen (its
// cgroup.freeze), not whether it is frozen through an ancestor (as the
// frozen of [Group.Events] also says when a slice above is frozen).
func (g *Group) Frozen() (bool, error) {
	b, err := g.read("cgroup.freeze")
	return strings.TrimSpace(string(b)) == "1", err
}

// WaitFrozen waits until every process of the cgroup is frozen (an empty
// cgroup is frozen at once), or ctx ends.
func (g *Group) WaitFrozen(ctx context.Context) error {
	return g.poll(ctx, func() (bool, error) {
		_, frozen, err := g.Events()
		return frozen, err
	})
}

// Kill sends SIGKILL to every process of the cgroup and below at once,
// processes forked meanwhile included (cgroup.kill, Linux 5.14); on an
// older kernel it signals each process it finds, frozen first so that
// none forks between the reading and the signals, and thaws the cgroup
// again if it froze it (a frozen cgroup says its work was ended by the
// lease's taker, [Group.End], and would freeze what starts in it next).
func (g *Group) Kill() error {
	err := g.write("cgroup.kill", "1")
	if err == nil || !errors.Is(err, ErrNotFound) {
		return err
	}
	wasFrozen, _ := g.Frozen()
	if err := g.Freeze(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = g.WaitFrozen(ctx)
	cancel()
	err = g.Signal(syscall.SIGKILL)
	if !wasFrozen {
		if terr := g.Thaw(); err == nil && !errors.Is(terr, ErrNotFound) {
			err = terr
		}
	}
	return err
}

// Signal sends sig to every process of the cgroup and below.
func (g *Group) Signal(sig syscall.Signal) error {
	pids, err := g.Procs()
	for _, pid := range pids {
		_ = unix.Kill(pid, sig)
	}
	return err
}

// Procs lists the processes of the cgroup and of the cgroups below it.
func (g *Group) Procs() ([]int, error) {
	var out []int
	err := g.walk(func(dirfd int, dir string) error {
		sub := &Group{dir: dir, fd: dirfd}
		data, err := sub.read("cgroup.procs")
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
		return nil
	})
	return out, err
}

// walk calls f for the cgroup and every cgroup below it, deepest first.
func (g *Group) walk(f func(dirfd int, dir string) error) error {
	return walkDir(g.fd, g.dir, f, 0)
}

func walkDir(fd int, dir string, f func(int, string) error, depth int) error {
	if depth > 64 {
		return fmt.Errorf("cgroup: %s: nested more than 64 deep", dir)
	}
	names, err := subgroups(fd)
	if err != nil {
		return pathError("list", dir, err)
	}
	for _, name := range names {
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // removed meanwhile
		}
		err = walkDir(sub, dir+"/"+name, f, depth+1)
		unix.Close(sub)
		if err != nil {
			return err
		}
	}
	return f(fd, dir)
}

// subgroups lists the directories in the cgroup directory fd.
func subgroups(fd int) ([]string, error) {
	dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(dup), "cgroup")
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// WaitEmpty waits until no process is left in the cgroup or below, or ctx
// ends (its error then). A cgroup removed meanwhile is empty.
func (g *Group) WaitEmpty(ctx context.Context) error {
	return g.poll(ctx, func() (bool, error) {
		p, err := g.Populated()
		if errors.Is(err, ErrNotFound) {
			return true, nil
		}
		return !p, err
	})
}

// Gone reports whether the cgroup was removed (by whoever ended it).
func (g *Group) Gone() bool {
	_, err := g.Populated()
	return errors.Is(err, ErrNotFound)
}

// Marked reports whether the cgroup has the cgroup name below it (such as
// [EndedMark]).
func (g *Group) Marked(name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(g.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// Mark makes the cgroup name below g (such as [EndedMark]), if missing.
func (g *Group) Mark(name string) error {
	if err := unix.Mkdirat(g.fd, name, 0o755); err != nil && err != unix.EEXIST {
		return pathError("make", g.dir+"/"+name, err)
	}
	return nil
}

// End freezes the cgroup, kills everything in it and waits, within bound,
// until nothing is left: [ErrSurvived] if something is (a process stuck
// in the kernel). It stays frozen, so that nothing started into it later
// runs an instruction; [Group.Remove] removes it.
func (g *Group) End(bound time.Duration) error {
	if err := g.Freeze(); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if err := g.Kill(); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := g.WaitEmpty(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %s still has processes %s after SIGKILL", ErrSurvived, g.dir, bound)
		}
		return err
	}
	return nil
}

// poll calls done until it says so, quickly at first (a kill or a freeze
// of a few processes takes well under a millisecond), then every 5 ms.
func (g *Group) poll(ctx context.Context, done func() (bool, error)) error {
	delay := 50 * time.Microsecond
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 5*time.Millisecond)
	}
}

// Remove removes the cgroup and the cgroups below it, deepest first; each
// must be empty. It acts through descriptors only (the parent found as
// "..", the cgroup by its id there), so it removes this very cgroup, also
// one opened by its id from another cgroup namespace. A cgroup already
// gone is no error.
func (g *Group) Remove() error {
	if err := removeBelow(g.fd, g.dir, 0); err != nil {
		return err
	}
	parent, err := unix.Openat(g.fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ENOENT || err == unix.ENODEV {
			return nil
		}
		return pathError("open the parent of", g.dir, err)
	}
	defer unix.Close(parent)
	names, err := subgroups(parent)
	if err != nil {
		return pathError("list the parent of", g.dir, err)
	}
	for _, name := range names {
		var st unix.Stat_t
		if unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Ino != g.ref.ID {
			continue
		}
		if err := unix.Unlinkat(parent, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
			return pathError("remove", g.dir, err)
		}
		return nil
	}
	return nil // gone already
}

// removeBelow removes every cgroup below the directory fd, deepest first.
func removeBelow(fd int, dir string, depth int) error {
	if depth > 64 {
		return fmt.Errorf("cgroup: %s: nested more than 64 deep", dir)
	}
	names, err := subgroups(fd)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
			return nil
		}
		return pathError("list", dir, err)
	}
	for _, name := range names {
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // removed meanwhile
		}
		err = removeBelow(sub, dir+"/"+name, depth+1)
		unix.Close(sub)
		if err != nil {
			return err
		}
		if err := unix.Unlinkat(fd, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
			return pathError("remove", dir+"/"+name, err)
		}
	}
	return nil
}

// HasPids reports whether the pids controller is enabled for the cgroup
// (its parent lists pids in cgroup.subtree_control): pids.max is there.
func (g *Group) HasPids() bool {
	var st unix.Stat_t
	return unix.Fstatat(g.fd, "pids.max", &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// SetPidsMax bounds the number of processes and threads in the cgroup.
func (g *Group) SetPidsMax(n int64) error {
	if !g.HasPids() {
		return fmt.Errorf("%w: the pids controller is not enabled for %s", ErrUnsupported, g.dir)
	}
	return g.write("pids.max", strconv.FormatInt(n, 10))
}

// PidsLimit is the tightest pids.max of the cgroup's ancestors, with
// their pids.current: how many more tasks the hierarchy lets in there.
// ok is false where no ancestor has a limit.
func PidsLimit(dir string) (left int64, ok bool) {
	m, err := mount()
	if err != nil {
		return 0, false
	}
	left = -1
	for d := filepath.Clean(dir); d == m || strings.HasPrefix(d, m+"/"); d = filepath.Dir(d) {
		maxData, err1 := os.ReadFile(filepath.Join(d, "pids.max"))
		curData, err2 := os.ReadFile(filepath.Join(d, "pids.current"))
		if err1 == nil && err2 == nil {
			mx, errA := strconv.ParseInt(strings.TrimSpace(string(maxData)), 10, 64)
			cur, errB := strconv.ParseInt(strings.TrimSpace(string(curData)), 10, 64)
			if errA == nil && errB == nil && (left < 0 || mx-cur < left) {
				left = max(mx-cur, 0)
			}
		}
		if d == m {
			break
		}
	}
	return left, left >= 0
}
