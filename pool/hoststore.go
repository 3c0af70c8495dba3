package pool

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/storefile"
	"github.com/durable-lease/durable-lease/lease"
)

// ErrStoreConflict reports a pool whose slots another store on this host
// already hands out: two stores granting the same ports and databases
// would let two holders use one slot at once.
var ErrStoreConflict = errors.New("pool: another store serves this pool")

// ResolveStoreField turns a pool file's "store" value into a store: a URL
// as it is, "~" or "~/..." under home, a relative path against the pool
// file's directory baseDir.
func ResolveStoreField(value, baseDir, home string) (string, error) {
	switch {
	case value == "":
		return "", configErr("$.store", "must not be empty (leave it out for the default store)")
	case lease.IsStoreURL(value):
		return value, nil
	case value == "~" || strings.HasPrefix(value, "~/"):
		if home == "" || !filepath.IsAbs(home) {
			return "", configErr("$.store", "%q starts with ~, but HOME is not set to an absolute directory", value)
		}
		return filepath.Join(home, strings.TrimPrefix(value, "~")), nil
	case strings.HasPrefix(value, "~"):
		return "", configErr("$.store", "%q: only ~ and ~/... (the user's home) are expanded, not ~user", value)
	case filepath.IsAbs(value):
		return filepath.Clean(value), nil
	}
	return filepath.Join(baseDir, value), nil
}

// Identity names a pool on a host for [ClaimHostStore]: its name and its
// slots (ids, kinds and attributes, the ports and databases they hand
// out). Two pool files that say the same give the same identity.
func (c *Config) Identity() string {
	type slot struct {
		ID    string         `json:"id"`
		Kind  string         `json:"kind"`
		Attrs map[string]any `json:"attrs"`
	}
	v := struct {
		Name  string `json:"name"`
		Slots []slot `json:"slots"`
	}{Name: c.Name}
	for _, s := range c.Slots {
		v.Slots = append(v.Slots, slot{s.ID, s.Kind, s.Attributes})
	}
	data, _ := json.Marshal(v) // maps are written with sorted keys
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

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
// (see [RegistryDir]); another store is refused with ErrStoreConflict
// while the recorded one is still in use: its directory exists and the
// pool file it was opened from still describes the same pool on the
// default store. A registration whose store or pool file is gone passes
// to the new store. Nothing is checked when registry is "".
func ClaimHostStore(c *Config, store, registry string, now time.Time) error {
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
		cur.Store != "" && cur.Store != store && stillServes(cur, id) {
		return fmt.Errorf("%w: pool %q (%s) is already served on this host by the store %s, the default store of %s; "+
			"this checkout's default store %s would hand out the same slots. Name one store for every checkout: "+
			"\"store\": \"~/.local/state/durable-lease/leases\" in the pool file, or LEASE_STORE, or --store "+
			"(if %s no longer uses this pool, remove %s)",
			ErrStoreConflict, c.Name, c.File, cur.Store, cur.PoolFile, store, cur.PoolFile, path)
	} else if err == nil && cur.Store == store && cur.PoolFile == c.File {
		return nil
	}
	data, _ := json.Marshal(registration{V: 1, Pool: c.Name, Identity: id, Store: store, PoolFile: c.File,
		Since: lease.FormatTime(now)})
	_ = storefile.Replace(path, ".tmp-"+newID(), append(data, '\n'), storefile.Private)
	return nil
}

// stillServes reports whether the registration r is still in use: its
// store directory exists, and its pool file is still a pool file of the
// same identity that names no store of its own.
func stillServes(r registration, id string) bool {
	if fi, err := os.Stat(r.Store); err != nil || !fi.IsDir() {
		return false
	}
	c, err := LoadFile(r.PoolFile)
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) && !isMissing(r.PoolFile)
	}
	return c.Store == "" && c.Identity() == id
}

func isMissing(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, fs.ErrNotExist)
}

// mkdirPrivate makes dir and its missing parents, the last one 0700.
func mkdirPrivate(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if err := storefile.Mkdir(dir, storefile.Private); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// StoreFor is where a pool's CLIs keep its leases: named (the --store
// flag, or LEASE_STORE) if set, else the pool file's "store", else "" for
// the default store, which the caller resolves and then passes to
// [ClaimHostStore].
func StoreFor(named string, c *Config) string {
	if named != "" {
		return named
	}
	return c.Store
}
