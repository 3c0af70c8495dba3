// Package storeopen opens the store a CLI was given: a directory, or a
// store URL served by a backend registered in this executable. The
// directory-store executables (lease, pool, pool-run) register none, so
// they never link a network client and start fast; given a URL they hand
// the whole command line to the executable that serves its scheme
// (durable-lease-<scheme>, found beside the running executable or on
// PATH), as git hands an https:// remote to git-remote-https.
package storeopen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/durable-lease/durable-lease/lease"
)

// Opener opens a store URL of one scheme with the store options given.
// It returns the store and a function that closes what it opened.
type Opener func(ctx context.Context, url string, opts ...lease.Option) (*lease.Store, func() error, error)

var (
	mu      sync.Mutex
	openers = map[string]Opener{}
)

// Register makes scheme's URLs open with o in this executable.
func Register(scheme string, o Opener) {
	mu.Lock()
	defer mu.Unlock()
	openers[scheme] = o
}

// ErrNotServed reports a store URL whose scheme this executable does not
// serve and for which no helper executable was found.
var ErrNotServed = errors.New("store URL scheme not served")

// HelperName is the executable that serves scheme's URLs.
func HelperName(scheme string) string { return "durable-lease-" + scheme }

// Scheme returns where's scheme, or "" for a directory.
func Scheme(where string) string {
	if !lease.IsStoreURL(where) {
		return ""
	}
	s, _, _ := strings.Cut(where, "://")
	return strings.ToLower(s)
}

// Open opens where: a directory store, or a URL of a registered scheme.
// A URL of another scheme is refused with an error matching
// lease.ErrInvalid; callers that can hand off call [HandOff] first.
func Open(ctx context.Context, where string, opts ...lease.Option) (*lease.Store, func() error, error) {
	scheme := Scheme(where)
	if scheme == "" {
		s, err := lease.Open(where, opts...)
		return s, func() error { return nil }, err
	}
	mu.Lock()
	o := openers[scheme]
	mu.Unlock()
	if o == nil {
		return nil, nil, fmt.Errorf("%w: store %q: %s:// stores are served by %s, which was not found beside this executable or on PATH",
			lease.ErrInvalid, redact(where), scheme, HelperName(scheme))
	}
	return o(ctx, where, opts...)
}

// Served reports whether this executable opens where itself.
func Served(where string) bool {
	scheme := Scheme(where)
	if scheme == "" {
		return true
	}
	mu.Lock()
	defer mu.Unlock()
	return openers[scheme] != nil
}

// HandOff replaces this process with the helper executable that serves
// where's scheme, running "<helper> <cli> <args...>" with the same
// environment, descriptors and process id, so signals, exit status and
// terminal behave as if the helper had been run directly. It returns only
// on failure: ErrNotServed when there is no helper, or the exec error.
func HandOff(where, cli string, args []string) error {
	scheme := Scheme(where)
	path := FindHelper(HelperName(scheme))
	if path == "" {
		return fmt.Errorf("%w: store %q: %s:// stores are served by %s, which was not found beside this executable or on PATH",
			ErrNotServed, redact(where), scheme, HelperName(scheme))
	}
	return Exec(path, cli, args)
}

// Exec replaces this process with the helper executable at path, running
// "<path> <cli> <args...>" with the same environment, descriptors and
// process id. It returns only on failure.
func Exec(path, cli string, args []string) error {
	argv := append([]string{path, cli}, args...)
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return fmt.Errorf("storeopen: run %s: %w", path, err)
	}
	return nil // not reached
}

// FullHelper is the executable that reads every command line of lease,
// pool and pool-run with the full parser (help, usage errors): the one
// that serves etcd:// stores, which links all three CLIs whole.
const FullHelper = "durable-lease-etcd"

// FindBeside returns the path of the helper executable name beside the
// running executable, or "": for hand-offs that must reach the same
// installation, never another version found on PATH.
func FindBeside(name string) string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	p := filepath.Join(filepath.Dir(exe), name)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return p
	}
	return ""
}

// FindHelper returns the path of the helper executable name, looking
// beside the running executable first (an install puts them together),
// then on PATH; "" when there is none.
func FindHelper(name string) string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
	}
	return ""
}

// redact drops anything between "://" and an "@" (credentials someone put
// in a URL).
func redact(url string) string {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return url
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if slash := strings.Index(rest, "/"); slash < 0 || at < slash {
			rest = "…@" + rest[at+1:]
		}
	}
	return scheme + "://" + rest
}

// OpenOrHandOff opens where if this executable serves it, and otherwise
// hands the command line over to the helper executable that does
// ([HandOff]); it returns an error (matching lease.ErrInvalid for an
// unknown scheme, so a usage error) only when neither is possible.
func OpenOrHandOff(ctx context.Context, where, cli string, args []string, opts ...lease.Option) (*lease.Store, func() error, error) {
	if !Served(where) {
		if err := HandOff(where, cli, args); err != nil {
			if errors.Is(err, ErrNotServed) {
				return nil, nil, fmt.Errorf("%w: %w", lease.ErrInvalid, err)
			}
			return nil, nil, err
		}
	}
	return Open(ctx, where, opts...)
}
