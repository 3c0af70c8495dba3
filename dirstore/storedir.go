package dirstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/durable-lease/durable-lease/internal/sys/storefile"
	"github.com/durable-lease/durable-lease/lease"
)

// CheckoutStoreSubdir is where the Node tool keeps its default store
// under a checkout (and where earlier versions of this one kept theirs).
const CheckoutStoreSubdir = "logs/leases"

// UserStoreSubdir is the default store under the user's state directory
// ([StateDir]).
const UserStoreSubdir = "leases"

// ErrNoDefaultStore reports a command that needs the default store where
// there is none: neither XDG_STATE_HOME nor HOME says where the user's
// state is. Nothing was read or written.
// It comes wrapped with [lease.ErrInvalid]: a usage error, exit 2.
var ErrNoDefaultStore = errors.New("no default store")

// ResolveStore picks the store directory: flag if set, else env
// (LEASE_STORE's value), else [UserStoreDir], the same for every
// directory, clone and worktree of the user's on this host.
//
// A value that looks like a URL (scheme://…) is returned as it is, for
// [Open] to refuse: taking "etcd://host/x" as a relative directory named
// "etcd:" would put leases where nobody else looks for them.
func ResolveStore(flag, env, cwd string) (string, error) {
	switch {
	case lease.IsStoreURL(flag):
		return flag, nil
	case flag == "" && lease.IsStoreURL(env):
		return env, nil
	case flag != "":
		return absFrom(cwd, flag), nil
	case env != "":
		return absFrom(cwd, env), nil
	}
	return UserStoreDir(os.Getenv)
}

func absFrom(cwd, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(cwd, p)
}

// StateDir is the user's directory of durable-lease state on this host:
// $XDG_STATE_HOME/durable-lease when XDG_STATE_HOME is an absolute path,
// else $HOME/.local/state/durable-lease when HOME is an existing
// directory (an absolute path), else [ErrNoDefaultStore]. It depends on
// neither the working directory nor git, so that every command, hook and
// gate of the user's finds the same one.
func StateDir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(filepath.Clean(x), "durable-lease"), nil
	}
	home := getenv("HOME")
	if home == "" || !filepath.IsAbs(home) {
		return "", fmt.Errorf("%w: %w: neither XDG_STATE_HOME nor HOME is set to an absolute directory, and the default store is under it; name a store with --store or LEASE_STORE", lease.ErrInvalid, ErrNoDefaultStore)
	}
	if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%w: %w: HOME=%s is not a directory, and the default store is under it; name a store with --store or LEASE_STORE", lease.ErrInvalid, ErrNoDefaultStore, home)
	}
	return filepath.Join(filepath.Clean(home), ".local", "state", "durable-lease"), nil
}

// UserStoreDir is the default store: [StateDir]/leases, one store per
// user for the whole host.
func UserStoreDir(getenv func(string) string) (string, error) {
	d, err := StateDir(getenv)
	if err != nil {
		return "", err
	}
	return filepath.Join(d, UserStoreSubdir), nil
}

// CheckoutStoreDir is logs/leases under the main checkout of the git
// repository containing dir, or under dir itself outside git: the Node
// tool's default store, which every subdirectory and every linked
// worktree of one repository resolve to (and the default of earlier
// versions of this tool). It reads .git, gitdir: and commondir files and
// never runs git, so GIT_DIR and GIT_WORK_TREE (which git hooks export)
// have no effect.
func CheckoutStoreDir(dir string) string {
	dir, _ = filepath.Abs(dir)
	if top := mainCheckout(dir); top != "" {
		return filepath.Join(top, CheckoutStoreSubdir)
	}
	return filepath.Join(dir, CheckoutStoreSubdir)
}

// WorktreeTop is the top of the git working tree containing dir (the
// nearest directory at or above it that holds a .git entry), or ""
// outside git. Like [CheckoutStoreDir] it never runs git.
func WorktreeTop(dir string) string {
	dir, _ = filepath.Abs(dir)
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if parent := filepath.Dir(d); parent == d {
			return ""
		}
	}
}

// mainCheckout walks up from dir to the nearest .git and returns the
// repository's main working tree, or "" outside git.
func mainCheckout(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		dotgit := filepath.Join(d, ".git")
		fi, err := os.Stat(dotgit)
		if err == nil {
			if fi.IsDir() {
				return d // the main checkout itself
			}
			return checkoutOfGitFile(d, dotgit)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return ""
		}
		if parent := filepath.Dir(d); parent == d {
			return ""
		}
	}
}

// checkoutOfGitFile follows a .git file ("gitdir: <path>") in worktree.
// A linked worktree's git dir has a commondir file naming the repository's
// shared .git directory, whose parent is the main checkout. A git dir
// without commondir (a submodule, or --separate-git-dir) belongs to
// worktree itself. A bare common directory has no main checkout, so each
// of its worktrees keeps its own store.
func checkoutOfGitFile(worktree, dotgit string) string {
	gitdir := readPointer(dotgit, "gitdir:")
	if gitdir == "" {
		return worktree
	}
	gitdir = absFrom(filepath.Dir(dotgit), gitdir)
	common := readPointer(filepath.Join(gitdir, "commondir"), "")
	if common == "" {
		return worktree
	}
	common = absFrom(gitdir, common)
	if filepath.Base(common) != ".git" {
		return worktree
	}
	return filepath.Dir(common)
}

// maxPointerBytes bounds a .git or commondir file (a path and a newline).
const maxPointerBytes = 64 << 10

// readPointer returns the first line of file with prefix removed and
// surrounding space trimmed, or "" if the file is missing, is not a
// regular file (a FIFO someone left at a .git on the way up must not
// block the command), is over its bound or does not start with prefix.
func readPointer(file, prefix string) string {
	data, err := storefile.ReadUserFile(file, maxPointerBytes)
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.TrimRight(line, "\r")
	if !strings.HasPrefix(line, prefix) {
		return ""
	}
	return strings.TrimSpace(strings.TrimPrefix(line, prefix))
}
