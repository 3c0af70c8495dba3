// Package storeopen opens the store a CLI was given: a directory, or a
// store URL served by a backend registered in this executable. The
// directory-store executables (lease, pool, pool-run) register none, so
// they never link a network client and start fast; given a URL of a
// scheme the project serves ([Schemes]) they hand the whole command line
// to the executable that serves it (durable-lease-<scheme>, installed
// beside the running executable; never one found on PATH), as git hands an
// https:// remote to git-remote-https. A URL of any other scheme is a
// usage error, and no error shows a URL's secrets ([Redact]).
package storeopen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/durable-lease/durable-lease/dirstore"
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

// ErrUnknownScheme reports a store URL of a scheme the project has no
// store for.
var ErrUnknownScheme = errors.New("unknown store URL scheme")

// Schemes are the URL schemes the project serves, each by the helper
// executable [HelperName] names. Only these are ever handed off: any
// other scheme is refused before anything is run, so a stray
// durable-lease-<word> on a system can never be made to run.
var Schemes = []string{"etcd", "git"}

// known reports whether scheme is one of [Schemes].
func known(scheme string) bool {
	for _, s := range Schemes {
		if s == scheme {
			return true
		}
	}
	return false
}

// HelperName is the executable that serves scheme's URLs.
func HelperName(scheme string) string { return "durable-lease-" + scheme }

// Scheme returns where's scheme, or "" for a directory. Every git+…
// store (git+file://, git+ssh://, git+https://, scp-like git+host:repo)
// is of the scheme "git".
func Scheme(where string) string {
	if !lease.IsStoreURL(where) {
		return ""
	}
	if strings.HasPrefix(where, "git+") {
		return "git"
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
		s, err := dirstore.Open(where, opts...)
		return s, func() error { return nil }, err
	}
	mu.Lock()
	o := openers[scheme]
	mu.Unlock()
	if o == nil {
		if !known(scheme) {
			return nil, nil, fmt.Errorf("%w: %w", lease.ErrInvalid, unknownScheme(where, scheme))
		}
		path, _ := Beside(HelperName(scheme))
		return nil, nil, fmt.Errorf("%w: %w", lease.ErrInvalid, notServed(where, scheme, path))
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
// terminal behave as if the helper had been run directly. Only a scheme
// of [Schemes] is handed off, and only to the helper installed beside this
// executable. It returns only on failure: ErrUnknownScheme for another
// scheme, ErrNotServed when there is no helper (or the helper is this very
// executable, which would hand the line back to itself forever), or the
// exec error.
func HandOff(where, cli string, args []string) error {
	scheme := Scheme(where)
	if !known(scheme) {
		return unknownScheme(where, scheme)
	}
	path, ok := Beside(HelperName(scheme))
	if !ok || isSelf(path) {
		return notServed(where, scheme, path)
	}
	return Exec(path, cli, args)
}

func unknownScheme(where, scheme string) error {
	return &schemeError{ErrUnknownScheme, fmt.Sprintf("store %q: there is no %s:// store (a store is a directory, %s)",
		Redact(where), scheme, schemeList())}
}

// schemeError is [ErrUnknownScheme] or [ErrNotServed] with its message
// alone: wrapped in lease.ErrInvalid for a usage error, it reads
// "lease: invalid argument: store …", one prefix, not the sentinel's
// text after the other's.
type schemeError struct {
	sentinel error
	msg      string
}

func (e *schemeError) Error() string { return e.msg }
func (e *schemeError) Unwrap() error { return e.sentinel }

// notServed says where the helper was looked for: path, the one place
// ("" when even that is unknown).
func notServed(where, scheme, path string) error {
	at := "beside this executable"
	if path != "" {
		at = "at " + path
	}
	return &schemeError{ErrNotServed, fmt.Sprintf("store %q: %s stores are served by %s, which is not installed %s (install it with the others: CGO_ENABLED=0 go install ./cmd/... in a clone)",
		Redact(where), strings.TrimSuffix(schemeForm(scheme), "…"), HelperName(scheme), at)}
}

// schemeForm is how a URL of scheme is written, for messages.
func schemeForm(scheme string) string {
	if scheme == "git" {
		return "git+<remote>"
	}
	return scheme + "://…"
}

func schemeList() string {
	var b strings.Builder
	for i, s := range Schemes {
		if i > 0 {
			b.WriteString(" or ")
		}
		b.WriteString(schemeForm(s))
	}
	return b.String()
}

// isSelf reports whether path is the running executable.
func isSelf(path string) bool {
	a, err := os.Stat(path)
	if err != nil {
		return false
	}
	b, err := os.Stat("/proc/self/exe")
	if err != nil {
		exe, eerr := os.Executable()
		if eerr != nil {
			return false
		}
		if b, err = os.Stat(exe); err != nil {
			return false
		}
	}
	return os.SameFile(a, b)
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

// Beside returns the path of the helper executable name beside the
// running executable, the one place a helper is looked for (never PATH,
// which may hold another version), and whether an executable file is
// there. path is "" only when the running executable's own path is
// unknown.
func Beside(name string) (path string, ok bool) {
	exe, err := os.Executable()
	if err != nil {
		return "", false
	}
	path = filepath.Join(filepath.Dir(exe), name)
	fi, err := os.Stat(path)
	return path, err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Redact returns a store URL fit to show: the user information (a
// password, or a token as the user), every query value and the fragment
// are replaced by "…"
// (a token in ?token=, a password in ?pw=), the rest kept, so that an
// error still says which store it is about. A directory is returned as it
// is.
func Redact(where string) string {
	if !lease.IsStoreURL(where) {
		return where
	}
	scheme, rest, ok := strings.Cut(where, "://")
	if !ok {
		// An scp-like git remote, git+user@host:path#namespace.
		rest, frag, hasFrag := strings.Cut(where, "#")
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			rest = "git+…@" + rest[at+1:]
		}
		if hasFrag && frag != "" {
			rest += "#…"
		}
		return rest
	}
	rest, frag, hasFrag := strings.Cut(rest, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	authority, path, hasPath := strings.Cut(rest, "/")
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		authority = "…@" + authority[at+1:] // a user name can be a token
	}
	var b strings.Builder
	b.WriteString(scheme + "://" + authority)
	if hasPath {
		b.WriteString("/" + path)
	}
	if hasQuery {
		b.WriteByte('?')
		for i, kv := range strings.Split(query, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			k, _, hasV := strings.Cut(kv, "=")
			b.WriteString(k)
			if hasV {
				b.WriteString("=…")
			}
		}
	}
	if hasFrag && frag != "" {
		b.WriteString("#…")
	}
	return b.String()
}

// OpenOrHandOff opens where if this executable serves it, and otherwise
// hands the command line over to the helper executable that does
// ([HandOff]); it returns an error (matching lease.ErrInvalid for an
// unknown scheme, so a usage error) only when neither is possible.
func OpenOrHandOff(ctx context.Context, where, cli string, args []string, opts ...lease.Option) (*lease.Store, func() error, error) {
	if !Served(where) {
		if err := HandOff(where, cli, args); err != nil {
			if errors.Is(err, ErrNotServed) || errors.Is(err, ErrUnknownScheme) {
				return nil, nil, fmt.Errorf("%w: %w", lease.ErrInvalid, err)
			}
			return nil, nil, err
		}
	}
	return Open(ctx, where, opts...)
}
