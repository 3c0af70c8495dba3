// Package dirpool keeps a pool's state on a directory store: its queue,
// statistics, grants, nudges and log as the files of <store>/<pool name>/,
// its queue lock as a lease of the store, and its waiters' wake-ups as
// inotify watches and bells (docs/PROTOCOL.md §6). It also keeps two
// stores on one host from serving the same pool ([ClaimHostStore], §6.11).
//
// It is apart from package dirstore because the lease command links the
// directory store and must not link package pool. A program that opens
// pools on a directory store links this package, which registers itself
// with [pool.RegisterProvider]; [pool.Open] then finds it.
package dirpool

import (
	"path/filepath"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

func init() { pool.RegisterProvider(find) }

// find serves the lease backends that are directories: package dirstore's,
// and any wrapper of it that keeps its Dir and EnsureDir.
func find(b lease.Backend) pool.BackendProvider {
	d, ok := b.(directory)
	if !ok || d.Dir() == "" {
		return nil
	}
	return provider{dir: d.Dir()}
}

// directory is what this package needs of a directory store's backend.
type directory interface {
	Dir() string
	EnsureDir() (group bool, err error)
}

type provider struct{ dir string }

// PoolBackend implements [pool.BackendProvider].
func (p provider) PoolBackend(cfg *pool.Config, h pool.Host) (pool.Backend, error) {
	return &dirState{cfg: cfg, h: h, dir: filepath.Join(p.dir, cfg.Name)}, nil
}

var (
	_ pool.BackendProvider = provider{}
	_ pool.Backend         = (*dirState)(nil)
)
