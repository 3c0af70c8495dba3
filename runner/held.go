package runner

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/durable-lease/durable-lease/lease"
)

// EnvHeld is the variable in which a run tells its work, and every run
// the work starts in turn, what it and its ancestor runs hold, so that a
// nested run asking for one of those leases fails at once
// ([ErrHeldByAncestor]) instead of waiting for itself forever. It is not
// a POOL_RUN_* variable, which describe the work's own lease only and are
// not passed on to a nested run's work.
//
// The value is a list of leases, outermost first, separated by ";". Each
// is a list of key=value fields separated by ",": store (the store's
// absolute directory, symbolic links resolved, or its URL as resolved),
// kind (the lease kind) and, for a pool slot, pool (the pool's name) and
// slot (the slot's id). In a value, '%', ',', ';', '=', space, control
// characters and non-ASCII bytes are written %XX. A reader ignores fields
// it does not know and entries without store or kind. For example:
//
//	store=/repo/logs/leases,kind=merge-baton;store=/repo/logs/leases,kind=slot-2,pool=e2e,slot=2
const EnvHeld = "DURABLE_LEASE_HELD"

// ErrHeldByAncestor reports a run that asked for a lease which an
// ancestor run (one whose work started it, directly or not) holds, as
// [EnvHeld] says: waiting could never end, as the ancestor waits for this
// run to finish. For a pool, it means the ancestors hold every slot.
var ErrHeldByAncestor = errors.New("held by an ancestor pool-run")

// HeldLease is one entry of [EnvHeld].
type HeldLease struct {
	Store, Kind string
	// Pool and Slot name a pool slot; both are empty for a baton.
	Pool, Slot string
}

// String is the lease for people: "slot 2 of pool e2e" or "lease k".
func (h HeldLease) String() string {
	if h.Slot != "" {
		return fmt.Sprintf("slot %s of pool %s", h.Slot, h.Pool)
	}
	return "lease " + h.Kind
}

// entry is h in EnvHeld's form.
func (h HeldLease) entry() string {
	fields := []string{"store=" + escapeHeld(h.Store), "kind=" + escapeHeld(h.Kind)}
	if h.Slot != "" {
		fields = append(fields, "pool="+escapeHeld(h.Pool), "slot="+escapeHeld(h.Slot))
	}
	return strings.Join(fields, ",")
}

// ParseHeld reads a value of [EnvHeld].
func ParseHeld(v string) []HeldLease {
	var out []HeldLease
	for e := range strings.SplitSeq(v, ";") {
		var h HeldLease
		for f := range strings.SplitSeq(e, ",") {
			key, raw, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			val, err := url.PathUnescape(raw)
			if err != nil {
				continue
			}
			switch key {
			case "store":
				h.Store = val
			case "kind":
				h.Kind = val
			case "pool":
				h.Pool = val
			case "slot":
				h.Slot = val
			}
		}
		if h.Store != "" && h.Kind != "" {
			out = append(out, h)
		}
	}
	return out
}

// escapeHeld writes %XX for the bytes EnvHeld does not keep as they are.
func escapeHeld(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("%,;=", c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// StoreID names a store in [EnvHeld]: its absolute directory with symbolic
// links resolved (when it exists), or its URL as the backend resolved it;
// "" for a store that has neither.
func StoreID(s *lease.Store) string {
	if s.Dir() == "" {
		return s.Where()
	}
	return canonicalDir(s.Dir())
}

func canonicalDir(dir string) string {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return real
	}
	return dir
}

// heldEnv is EnvHeld's value for the work: base's, then h.
func heldEnv(base []string, h HeldLease) string {
	prev := lookup(base, EnvHeld)
	if h.Store == "" {
		return prev
	}
	if prev == "" {
		return h.entry()
	}
	return prev + ";" + h.entry()
}

// lookup is the value of the last name=... in env.
func lookup(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// CheckAncestors returns an error matching [ErrHeldByAncestor] when the
// ancestors listed in env's [EnvHeld] (nil env: the process's) hold what
// o asks for: o.Kind on o.Store, or every slot of o.Pool. It reads no
// store: a pool slot an ancestor does not hold may be taken, and is
// waited for as usual.
func CheckAncestors(o *Options, env []string) error {
	if env == nil {
		env = os.Environ()
	}
	held := ParseHeld(lookup(env, EnvHeld))
	if len(held) == 0 || o.Store == nil {
		return nil
	}
	store := StoreID(o.Store)
	mine := func(h HeldLease) bool {
		if h.Store == store {
			return true
		}
		return o.Store.Dir() != "" && filepath.IsAbs(h.Store) && canonicalDir(h.Store) == store
	}
	if o.Pool == nil {
		for _, h := range held {
			if mine(h) && h.Kind == o.Kind {
				return &heldError{fmt.Sprintf("%s of store %s is held by an ancestor pool-run, as %s says: waiting for it would never end", h, store, EnvHeld)}
			}
		}
		return nil
	}
	slots := o.Pool.Config().Slots
	var names []string
	for _, sl := range slots {
		found := false
		for _, h := range held {
			if mine(h) && h.Kind == sl.Kind {
				found = true
				break
			}
		}
		if !found {
			return nil // a slot the ancestors do not hold
		}
		names = append(names, "slot "+sl.ID)
	}
	if len(names) == 0 {
		return nil
	}
	return &heldError{fmt.Sprintf("every slot of pool %s of store %s (%s) is held by an ancestor pool-run, as %s says: waiting for one would never end",
		o.Pool.Config().Name, store, strings.Join(names, ", "), EnvHeld)}
}

// heldError is an ErrHeldByAncestor with its own message.
type heldError struct{ msg string }

func (e *heldError) Error() string        { return e.msg }
func (e *heldError) Is(target error) bool { return target == ErrHeldByAncestor }
