package dirpool

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/sys/storefile"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// The host registry records, for every user of a host, which store serves
// each pool the user has used (docs/PROTOCOL.md §6.11). A pool's slots
// are the host's (ports, databases), so two stores handing them out, be
// they two users' or one user's two default stores, would put two holders
// on one slot.
//
// It lives in a sticky directory every user can write (/tmp), one
// directory per user in it, which only that user can write, so that no
// user can plant, change or remove another's claims: a directory or file
// is believed only for the user who owns it and whose uid it names, and
// nothing in it is followed, blocked on or read past its bound.

// RegistryEnv names the directory the host registry is in when set.
const RegistryEnv = "LEASE_HOST_REGISTRY"

// DefaultRegistryBase is where the host registry is by default: a
// directory every user of the host can write, whose sticky bit keeps each
// user's entries the user's.
const DefaultRegistryBase = "/tmp"

// registryPrefix starts the name of each user's registry directory:
// durable-lease-pools-<uid>, or durable-lease-pools-<uid>-<hex> when that
// name was taken by someone else first.
const registryPrefix = "durable-lease-pools-"

// maxRegistrationBytes bounds a claim file (ours are a few hundred
// bytes).
const maxRegistrationBytes = 64 << 10

// pendingStale is how long a claim counts whatever its store: a command
// writes a pending claim and decides within milliseconds, then makes its
// store, so an older pending claim is a command that died in between,
// and an older serving one counts as long as its store and pool file
// exist.
const pendingStale = 30 * time.Second

// claim states.
const (
	statePending = "pending"
	stateServing = "serving"
)

// claim is one file of a user's registry: the store that serves a pool
// for that user, and the pool file it was last opened from.
type claim struct {
	V        int    `json:"v"`
	UID      uint32 `json:"uid"`
	Pool     string `json:"pool"`
	Identity string `json:"identity"`
	Store    string `json:"store"`
	Default  bool   `json:"default"`
	PoolFile string `json:"poolFile"`
	State    string `json:"state"`
	Since    string `json:"since"` // since when the user's store has served the pool
	At       string `json:"at"`    // when the claim was written

	path string // where it was read
}

// HostRegistry is the host registry of one host: the directory Base that
// holds every user's registry directory. Named is true when Base came
// from [RegistryEnv], where an unusable directory is an error rather than
// a skipped check.
type HostRegistry struct {
	Base  string
	Named bool
}

// RegistryFrom is the host registry that the environment getenv names:
// [RegistryEnv] if set, else [DefaultRegistryBase].
func RegistryFrom(getenv func(string) string) HostRegistry {
	if b := getenv(RegistryEnv); b != "" {
		return HostRegistry{Base: b, Named: true}
	}
	return HostRegistry{Base: DefaultRegistryBase}
}

// ClaimHostStore makes sure that store is the only store on this host
// serving the pool c (see [HostRegistry]): the call is refused with
// [pool.ErrStoreConflict], naming the other store and the fix, when
//
//   - another user's store, not this one, serves the pool (a group store
//     that both use is one store, and no conflict); or
//   - this user's default store (isDefault) is not the default store that
//     served it last, and that one is still in use (its directory exists,
//     and its pool file still describes this pool and names no store):
//     another XDG_STATE_HOME or HOME.
//
// A claim is still in use until its store directory or its pool file is
// gone. With register, a command that goes on records its store (first as
// pending, then, once no other user's claim stood in the way, as serving,
// so that two users starting at once never both go on); a read (register
// false) is checked the same way but records nothing.
func ClaimHostStore(r HostRegistry, c *pool.Config, store string, isDefault bool, now time.Time, register bool) error {
	if c.File == "" || store == "" {
		return nil
	}
	if err := checkBase(r.Base); err != nil {
		if r.Named {
			return fmt.Errorf("%w: %s=%s: %v", pool.ErrInvalid, RegistryEnv, r.Base, err)
		}
		return nil // no registry can be kept on this host: nothing is checked
	}
	// Short of a registry (a full or read-only /tmp), the check is
	// skipped, as it is where there is no /tmp; in a registry named on
	// purpose it is an error.
	broken := func(err error) error {
		if !r.Named {
			return nil
		}
		return fmt.Errorf("pool %s: the host registry in %s: %w", c.Name, r.Base, err)
	}
	me := uint32(unix.Geteuid())
	dirs, err := userDirs(r.Base)
	if err != nil {
		if r.Named {
			return fmt.Errorf("%w: %s=%s: %v", pool.ErrInvalid, RegistryEnv, r.Base, err)
		}
		return nil
	}
	mine := ""
	if d := dirs[me]; len(d) > 0 {
		mine = d[0]
	} else if register {
		if mine, err = makeUserDir(r.Base, me); err != nil {
			return broken(err)
		}
	}
	id := c.Identity()
	name := c.Name + "-" + id + ".json"
	var own *claim
	if mine != "" {
		lock, err := storefile.OpenLock(filepath.Join(mine, ".lock"), storefile.Private)
		if err != nil {
			return broken(err)
		}
		defer lock.Close()
		if err := storefile.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
			return broken(err)
		}
		own = readClaim(filepath.Join(mine, name), me, id)
	}
	if own != nil && own.State == stateServing && own.Default && isDefault && !sameDir(own.Store, store) && stillServes(*own, id) {
		return fmt.Errorf("%w: pool %q (%s) is already served on this host by the store %s, your default store when it was opened from %s; "+
			"this command's default store %s (another XDG_STATE_HOME or HOME) would hand out the same slots. Name one store for every command: "+
			"\"store\" in the pool file, or LEASE_STORE, or --store (if %s no longer uses this pool, remove %s)",
			pool.ErrStoreConflict, c.Name, c.File, own.Store, own.PoolFile, store, own.PoolFile, own.path)
	}
	established := own != nil && own.State == stateServing
	path := filepath.Join(mine, name)
	pending := false
	if register && !established {
		// Said before looking: of two users starting at once, the one
		// who looks second sees the other's claim.
		if err := writeClaim(path, claimOf(me, c, id, store, isDefault, statePending, now)); err != nil {
			return broken(err)
		}
		pending = true
		// Listed again after: the other user's directory may be newer
		// than the first listing.
		if dirs, err = userDirs(r.Base); err != nil {
			_ = unix.Unlink(path)
			return broken(err)
		}
	}
	for uid, ds := range dirs {
		if uid == me {
			continue
		}
		for _, d := range ds {
			other := readClaim(filepath.Join(d, name), uid, id)
			if other == nil || sameDir(other.Store, store) || !other.live(now) || (!register || established) && other.State != stateServing {
				continue
			}
			if pending {
				_ = unix.Unlink(path)
			}
			return crossUser(c, other, store)
		}
	}
	if !register {
		return nil
	}
	if pending || own.Store != store || own.PoolFile != c.File || own.Default != isDefault {
		next := claimOf(me, c, id, store, isDefault, stateServing, now)
		if own != nil && own.State == stateServing {
			next.Since = own.Since
		}
		if err := writeClaim(path, next); err != nil {
			return broken(err)
		}
		forgetOtherIdentities(mine, name, c.File, me)
	}
	return nil
}

func claimOf(uid uint32, c *pool.Config, id, store string, isDefault bool, state string, now time.Time) claim {
	return claim{V: 2, UID: uid, Pool: c.Name, Identity: id, Store: store, Default: isDefault,
		PoolFile: c.File, State: state, Since: lease.FormatTime(now), At: lease.FormatTime(now)}
}

// crossUser is the refusal of a pool another user's store serves.
func crossUser(c *pool.Config, other *claim, store string) error {
	who := "uid " + strconv.FormatUint(uint64(other.UID), 10)
	if u, err := user.LookupId(strconv.FormatUint(uint64(other.UID), 10)); err == nil {
		who = u.Username + " (" + who + ")"
	}
	return fmt.Errorf("%w: pool %q (%s) is already served on this host by %s from the store %s (pool file %s), "+
		"and this store, %s, would hand out the same slots again: its ports and databases are the host's, not a user's. "+
		"Serve the pool from one store for every user: a group store that root makes once "+
		"(sudo install -d -m 2770 -o root -g GROUP /srv/leases, every user of the pool in GROUP), "+
		"named as \"store\": \"/srv/leases\" in the pool file or LEASE_STORE=/srv/leases "+
		"(docs/CLI.md, \"Stores and who may use them\"). If %s no longer uses this pool, they or root can remove %s",
		pool.ErrStoreConflict, c.Name, c.File, who, other.Store, other.PoolFile, store, who, other.path)
}

// live reports whether another user's claim still counts: any claim for
// pendingStale after it was written (its store is made just after), then
// a pending one no more, and a serving one while its store directory and
// its pool file both exist. (Nothing of theirs is read: a pool file of
// another user's could be anything, a device included.)
func (cl *claim) live(now time.Time) bool {
	if at, err := lease.ParseTime(cl.At); err == nil && now.Sub(at) < pendingStale && at.Sub(now) < pendingStale {
		return true
	}
	if cl.State == statePending {
		return false
	}
	return !gone(cl.Store) && !gone(cl.PoolFile)
}

func gone(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR)
}

// stillServes reports whether the user's own default-store claim r is
// still in use: its store directory exists, and its pool file is still a
// pool file of the same identity that names no store of its own.
func stillServes(r claim, id string) bool {
	if fi, err := os.Stat(r.Store); err != nil || !fi.IsDir() {
		return false
	}
	c, err := pool.LoadFile(r.PoolFile)
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) && !gone(r.PoolFile)
	}
	return c.StoreField == "" && c.Identity() == id
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

// readClaim reads the claim at path of the user uid for the pool of
// identity id, or nil if there is none to believe: missing, not a regular
// file of uid's with one link, over its bound, not a claim, or a claim
// that names another user or pool.
func readClaim(path string, uid uint32, id string) *claim {
	f, data, err := storefile.OpenRead(path, maxRegistrationBytes)
	if err != nil {
		return nil
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Uid != uid {
		return nil
	}
	var cl claim
	if json.Unmarshal(data, &cl) != nil || cl.V != 2 || cl.UID != uid || cl.Identity != id ||
		!filepath.IsAbs(cl.Store) || !filepath.IsAbs(cl.PoolFile) || (cl.State != statePending && cl.State != stateServing) {
		return nil
	}
	cl.path = path
	return &cl
}

// writeClaim replaces the claim at path (a temporary file renamed into
// place), readable by every user: it names a pool, a store and a pool
// file, nothing secret.
func writeClaim(path string, cl claim) error {
	data, err := json.Marshal(cl)
	if err != nil {
		return err
	}
	return storefile.Replace(path, ".tmp-"+lease.RandomHex(16), append(data, '\n'), claimPerm)
}

// claimPerm is the mode of a claim file: the user writes it, every user
// reads it.
const claimPerm = storefile.Perm(0o644)

// forgetOtherIdentities removes the user's claims in dir, but keep's,
// that came from poolFile: it describes one pool, so a claim of another
// identity from it is of the pool as it was before an edit.
func forgetOtherIdentities(dir, keep, poolFile string, uid uint32) {
	names, err := readNames(dir)
	if err != nil {
		return
	}
	for _, n := range names {
		if n == keep || !strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") {
			continue
		}
		p := filepath.Join(dir, n)
		f, data, err := storefile.OpenRead(p, maxRegistrationBytes)
		if err != nil {
			continue
		}
		f.Close()
		var cl claim
		if json.Unmarshal(data, &cl) == nil && cl.UID == uid && cl.PoolFile == poolFile {
			_ = unix.Unlink(p)
		}
	}
}

// checkBase judges the directory the registry is in: a real directory
// (or a symbolic link to one, of root's or the user's, as /tmp is on
// some systems) of root's or the user's, which, if others can write it,
// is sticky, so that each user's entries stay theirs.
func checkBase(base string) error {
	if !filepath.IsAbs(base) {
		return fmt.Errorf("not an absolute path")
	}
	me := uint32(unix.Geteuid())
	var st unix.Stat_t
	if err := unix.Lstat(base, &st); err != nil {
		return err
	}
	if uint32(st.Mode)&unix.S_IFMT == unix.S_IFLNK {
		if st.Uid != 0 && st.Uid != me {
			return fmt.Errorf("a symbolic link of uid %d", st.Uid)
		}
		if err := unix.Stat(base, &st); err != nil {
			return err
		}
	}
	switch {
	case uint32(st.Mode)&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("not a directory")
	case st.Uid != 0 && st.Uid != me:
		return fmt.Errorf("belongs to uid %d, who could remove every user's entries", st.Uid)
	case st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0:
		return fmt.Errorf("writable by others without the sticky bit (mode %04o), so anyone could remove every user's entries", st.Mode&0o7777)
	}
	return nil
}

// userDirs lists the registry directories in base that can be believed,
// by the uid they belong to (each user's first the one named
// durable-lease-pools-<uid>, then the others by name).
func userDirs(base string) (map[uint32][]string, error) {
	names, err := readNames(base)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	dirs := map[uint32][]string{}
	for _, n := range names {
		rest, ok := strings.CutPrefix(n, registryPrefix)
		if !ok {
			continue
		}
		digits, _, _ := strings.Cut(rest, "-")
		uid, err := strconv.ParseUint(digits, 10, 32)
		if err != nil || strconv.FormatUint(uid, 10) != digits {
			continue
		}
		if p := filepath.Join(base, n); trustedDir(p, uint32(uid)) {
			dirs[uint32(uid)] = append(dirs[uint32(uid)], p)
		}
	}
	return dirs, nil
}

func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// trustedDir reports whether path is a registry directory of uid's: a
// real directory (not a symbolic link), owned by uid, that nobody else
// can write.
func trustedDir(path string, uid uint32) bool {
	var st unix.Stat_t
	return unix.Lstat(path, &st) == nil && uint32(st.Mode)&unix.S_IFMT == unix.S_IFDIR &&
		st.Uid == uid && st.Mode&0o022 == 0
}

// makeUserDir makes the user's registry directory in base, mode 0755
// whatever the umask (every user reads the claims in it): under its own
// name, or, when someone else took that name first, under a name of its
// own with random digits, which nobody can take ahead of it.
func makeUserDir(base string, uid uint32) (string, error) {
	primary := filepath.Join(base, registryPrefix+strconv.FormatUint(uint64(uid), 10))
	for i := 0; ; i++ {
		p := primary
		if i > 0 {
			p = primary + "-" + lease.RandomHex(8)
		}
		err := storefile.MkdirMode(p, 0o755)
		if err == nil && trustedDir(p, uid) {
			return p, nil
		}
		if err != nil && !errors.Is(err, fs.ErrExist) || i == 8 {
			if err == nil {
				err = fmt.Errorf("%s is not a directory of uid %d's after it was made", p, uid)
			}
			return "", err
		}
	}
}
