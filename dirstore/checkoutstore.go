package dirstore

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/durable-lease/durable-lease/lease"
)

// ErrStoreSplit reports a command on the default store while the Node
// tool's default store of the same checkout ([CheckoutStoreDir]) holds a
// live lease of a kind the command would take: each store would grant
// it, so the two tools would both hold it. Nothing was read or written in
// the default store.
var ErrStoreSplit = errors.New("lease: two stores would grant the same lease")

// CheckCheckoutStore is what a command that takes leases on the default
// store (store, the user's) does first: when the working directory cwd
// has a Node tool's default store ([CheckoutStoreDir]: logs/leases of the
// main checkout, where earlier versions of this tool kept theirs too)
// holding a live lease of one of kinds, it refuses with [ErrStoreSplit]
// and the fix, instead of granting a second holder in another store.
//
// This catches the split while the other tool holds; it cannot stop the
// Node tool, which never looks here, from taking a lease this tool holds
// in the default store, which is why a migration gives both tools one
// LEASE_STORE (docs/MIGRATING.md). A checkout store another user could
// change ([ErrUnsafeStore]), or one that cannot be read, is not a store of
// the user's and is left out of the judgement; nothing is created.
func CheckCheckoutStore(ctx context.Context, cwd, store string, kinds []string, opts ...lease.Option) error {
	other := CheckoutStoreDir(cwd)
	fi, err := os.Stat(other)
	if err != nil || !fi.IsDir() || sameDirectory(other, store) {
		return nil
	}
	s, err := Open(other, opts...)
	if err != nil {
		return nil
	}
	for _, kind := range kinds {
		st, err := s.Status(ctx, kind)
		if err != nil || st.State != lease.Held {
			continue
		}
		return fmt.Errorf("%w: %s, the Node tool's default store for this checkout (and that of earlier versions of this tool), holds %s for %q until %s, "+
			"and this tool's default store is %s: each would grant it. During a migration give both tools one store: "+
			"LEASE_STORE=%s for the Node tool's commands (every clone and worktree then shares it), or LEASE_STORE=%s for this tool's here (docs/MIGRATING.md)",
			ErrStoreSplit, other, kind, st.Record.Owner, lease.FormatTime(st.ExpiresAt), store, store, other)
	}
	return nil
}

// sameDirectory reports whether a and b name one directory (by name, or
// reached by two paths); a missing one is no match.
func sameDirectory(a, b string) bool {
	if a == b {
		return true
	}
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
