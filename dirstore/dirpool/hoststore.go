package dirpool

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/storefile"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// registration is one file of the host registry: which store serves a
// pool, and from which pool file it was last opened there.
type registration struct {
	V        int    `json:"v"`
	Pool     string `json:"pool"`
	Identity string `json:"identity"`
	Store    string `json:"store"`
	PoolFile string `json:"poolFile"`
	Since    string `json:"since"`
}

// maxRegistrationBytes bounds a registry file (ours are a few hundred
// bytes).
const maxRegistrationBytes = 64 << 10

// RegistryDir is the per-user directory of the host registry:
// $XDG_STATE_HOME/durable-lease/pools, else ~/.local/state/durable-lease/pools,
// or "" when neither names an existing directory of the user (HOME unset,
// or a home that does not exist): the check is then skipped.
func RegistryDir(getenv func(string) string) string {
	base := getenv("XDG_STATE_HOME")
	if base == "" || !filepath.IsAbs(base) {
		home := getenv("HOME")
		if home == "" || !filepath.IsAbs(home) {
			return ""
		}
		if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
			return ""
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "durable-lease", "pools")
}

// ClaimHostStore makes sure that store is the only store on this host
// serving the pool c, when the store is the default one (no --store,
// LEASE_STORE or "store" in the pool file named it): two clones of one
// project each default to a store of their own, and would hand out the
// same slots. The first store to serve a pool is recorded in registry
// (see [RegistryDir]); another store is refused with [pool.ErrStoreConflict]
// while the recorded one is still in use: its directory exists and the
// pool file it was opened from still describes the same pool on the
// default store. A registration whose store or pool file is gone passes
// to the new store. Nothing is checked when registry is "".
//
// A read (register false) is checked the same way but records nothing,
// so that a look from another checkout never claims the pool.
func ClaimHostStore(c *pool.Config, store, registry string, now time.Time, register bool) error {
	if registry == "" || c.File == "" {
		return nil
	}
	if err := mkdirPrivate(registry); err != nil {
		return nil // no registry can be kept here: the check is skipped
	}
	lock, err := storefile.OpenLock(filepath.Join(registry, ".lock"), storefile.Private)
	if err != nil {
		return nil
	}
	defer lock.Close()
	if err := storefile.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return nil
	}
	id := c.Identity()
	path := filepath.Join(registry, c.Name+"-"+id+".json")
	var cur registration
	if data, err := storefile.Read(path, maxRegistrationBytes); err == nil && json.Unmarshal(data, &cur) == nil &&
		cur.Store != "" && !sameDir(cur.Store, store) && stillServes(cur, id) {
		return fmt.Errorf("%w: pool %q (%s) is already served on this host by the store %s, the default store of %s; "+
			"this checkout's default store %s would hand out the same slots. Name one store for every checkout: "+
			"\"store\": \"~/.local/state/durable-lease/leases\" in the pool file, or LEASE_STORE, or --store "+
			"(if %s no longer uses this pool, remove %s)",
			pool.ErrStoreConflict, c.Name, c.File, cur.Store, cur.PoolFile, store, cur.PoolFile, path)
	} else if !register || err == nil && sameDir(cur.Store, store) && sameDir(cur.PoolFile, c.File) {
		return nil
	}
	data, _ := json.Marshal(registration{V: 1, Pool: c.Name, Identity: id, Store: store, PoolFile: c.File,
		Since: lease.FormatTime(now)})
	_ = storefile.Replace(path, ".tmp-"+lease.RandomHex(16), append(data, '\n'), storefile.Private)
	return nil
}

// stillServes reports whether the registration r is still in use: its
// store directory exists, and its pool file is still a pool file of the
// same identity that names no store of its own.
func stillServes(r registration, id string) bool {
	if fi, err := os.Stat(r.Store); err != nil || !fi.IsDir() {
		return false
	}
	c, err := pool.LoadFile(r.PoolFile)
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) && !isMissing(r.PoolFile)
	}
	return c.StoreField == "" && c.Identity() == id
}

func isMissing(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, fs.ErrNotExist)
}

// sameDir reports whether a and b are one directory or file (by name, or reached
// by two paths: a symbolic link, a bind mount); a missing one is no match.
func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// mkdirPrivate makes the registry directory dir and its missing parents
// below the existing base (HOME or XDG_STATE_HOME), each 0700 whatever
// the umask, and succeeds only if every one of them, from the base down,
// is a real directory (no symbolic link) of the user's that nobody else
// can write: a registry another user could change would let them claim
// or free pools, or make this process write where they chose.
func mkdirPrivate(dir string) error {
	base := dir
	var below []string
	for {
		fi, err := os.Lstat(base)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s is not a directory", base)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		below = append([]string{filepath.Base(base)}, below...)
		parent := filepath.Dir(base)
		if parent == base {
			return fmt.Errorf("no existing directory above %s", dir)
		}
		base = parent
	}
	if err := ownDir(base); err != nil {
		return err
	}
	for _, name := range below {
		base = filepath.Join(base, name)
		if err := storefile.Mkdir(base, storefile.Private); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	// Every component from HOME (or XDG_STATE_HOME) down.
	for d := dir; ; d = filepath.Dir(d) {
		if err := ownDir(d); err != nil {
			return err
		}
		if d == registryBase(dir) || d == filepath.Dir(d) {
			return nil
		}
	}
}

// registryBase is the directory the registry dir hangs from: the part
// above durable-lease/pools and the .local/state under HOME.
func registryBase(dir string) string {
	b := filepath.Dir(filepath.Dir(dir)) // above durable-lease/pools
	if filepath.Base(b) == "state" && filepath.Base(filepath.Dir(b)) == ".local" {
		return filepath.Dir(filepath.Dir(b))
	}
	return b
}

// ownDir checks that path is a real directory of the user's (or root's)
// that neither its group nor others can write.
func ownDir(path string) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return err
	}
	me := uint32(unix.Geteuid())
	switch {
	case uint32(st.Mode)&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%s is not a directory", path)
	case st.Uid != me && st.Uid != 0:
		return fmt.Errorf("%s belongs to uid %d", path, st.Uid)
	case st.Mode&0o022 != 0 && uint32(st.Mode)&unix.S_ISVTX == 0:
		return fmt.Errorf("%s is writable by others", path)
	}
	return nil
}
