package dirstore

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/durable-lease/durable-lease/lease"
)

// DefaultStoreSubdir is where the default store lives under a checkout.
const DefaultStoreSubdir = "logs/leases"

// ResolveStore picks the store directory: flag if set, else env
// (LEASE_STORE's value), else [DefaultStoreDir] of cwd.
//
// A value that looks like a URL (scheme://…) is returned as it is, for
// [Open] to refuse: taking "etcd://host/x" as a relative directory named
// "etcd:" would put leases where nobody else looks for them.
func ResolveStore(flag, env, cwd string) string {
	switch {
	case lease.IsStoreURL(flag):
		return flag
	case flag == "" && lease.IsStoreURL(env):
		return env
	case flag != "":
		return absFrom(cwd, flag)
	case env != "":
		return absFrom(cwd, env)
	}
	return DefaultStoreDir(cwd)
}

func absFrom(cwd, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(cwd, p)
}

// DefaultStoreDir is logs/leases under the main checkout of the git
// repository containing dir, or under dir itself outside git. Every
// subdirectory and every linked worktree of one repository resolves to the
// same store. It reads .git, gitdir: and commondir files and never runs git,
// so GIT_DIR and GIT_WORK_TREE (which git hooks export) have no effect.
func DefaultStoreDir(dir string) string {
	dir, _ = filepath.Abs(dir)
	if top := mainCheckout(dir); top != "" {
		return filepath.Join(top, DefaultStoreSubdir)
	}
	return filepath.Join(dir, DefaultStoreSubdir)
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

// readPointer returns the first line of file with prefix removed and
// surrounding space trimmed, or "" if the file is missing or does not start
// with prefix.
func readPointer(file, prefix string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, prefix) {
		return ""
	}
	return strings.TrimSpace(strings.TrimPrefix(line, prefix))
}
