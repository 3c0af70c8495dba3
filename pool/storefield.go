package pool

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

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

// StoreFor is where a pool's CLIs keep its leases: named (the --store
// flag, or LEASE_STORE) if set, else the pool file's "store" (resolved
// now, against HOME for "~/…"), else "" for the default store, which the
// caller resolves and then passes to dirpool.ClaimHostStore.
func StoreFor(named string, c *Config) (string, error) {
	if named != "" || c.StoreField == "" {
		return named, nil
	}
	return ResolveStoreField(c.StoreField, c.storeBase, os.Getenv("HOME"))
}
