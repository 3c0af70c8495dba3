package dirstore

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tempBase is a fresh directory with symlinks resolved, so paths git writes
// (which are real paths) compare equal to the ones the test builds.
func tempBase(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mkdirs(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.MkdirAll(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
}

func store(dir string) string { return filepath.Join(dir, "logs", "leases") }

func TestCheckoutStoreDirLayouts(t *testing.T) {
	tests := []struct {
		name string
		// build lays out a tree under base and returns the directory to
		// resolve from and the checkout whose store is expected.
		build func(t *testing.T, base string) (from, want string)
	}{
		{
			name: "outside git",
			build: func(t *testing.T, base string) (string, string) {
				d := filepath.Join(base, "plain", "dir")
				mkdirs(t, d)
				return d, d
			},
		},
		{
			name: "repository root",
			build: func(t *testing.T, base string) (string, string) {
				mkdirs(t, filepath.Join(base, "repo", ".git"))
				return filepath.Join(base, "repo"), filepath.Join(base, "repo")
			},
		},
		{
			name: "nested subdirectory",
			build: func(t *testing.T, base string) (string, string) {
				mkdirs(t, filepath.Join(base, "repo", ".git"), filepath.Join(base, "repo", "a", "b", "c"))
				return filepath.Join(base, "repo", "a", "b", "c"), filepath.Join(base, "repo")
			},
		},
		{
			name: "subdirectory that does not exist yet",
			build: func(t *testing.T, base string) (string, string) {
				mkdirs(t, filepath.Join(base, "repo", ".git"))
				return filepath.Join(base, "repo", "not", "there"), filepath.Join(base, "repo")
			},
		},
		{
			name: "linked worktree with a relative gitdir",
			build: func(t *testing.T, base string) (string, string) {
				main := filepath.Join(base, "main")
				wtGit := filepath.Join(main, ".git", "worktrees", "wt")
				wt := filepath.Join(base, "worktrees", "wt")
				mkdirs(t, wtGit, filepath.Join(wt, "sub"))
				writeFile(t, wtGit, "commondir", "../..\n")
				writeFile(t, wt, ".git", "gitdir: ../../main/.git/worktrees/wt\n")
				return filepath.Join(wt, "sub"), main
			},
		},
		{
			name: "submodule: gitdir without commondir",
			build: func(t *testing.T, base string) (string, string) {
				super := filepath.Join(base, "super")
				sub := filepath.Join(super, "libs", "sub")
				mkdirs(t, filepath.Join(super, ".git", "modules", "sub"), filepath.Join(sub, "pkg"))
				writeFile(t, sub, ".git", "gitdir: ../../.git/modules/sub\n")
				return filepath.Join(sub, "pkg"), sub
			},
		},
		{
			name: "worktree of a bare repository",
			build: func(t *testing.T, base string) (string, string) {
				bare := filepath.Join(base, "repo.git")
				wtGit := filepath.Join(bare, "worktrees", "wt")
				wt := filepath.Join(base, "wt")
				mkdirs(t, wtGit, wt)
				writeFile(t, wtGit, "commondir", "../..\n")
				writeFile(t, wt, ".git", "gitdir: "+wtGit+"\n")
				return wt, wt
			},
		},
		{
			name: ".git file that is not a gitdir pointer",
			build: func(t *testing.T, base string) (string, string) {
				d := filepath.Join(base, "odd")
				mkdirs(t, filepath.Join(d, "x"))
				writeFile(t, d, ".git", "something else\n")
				return filepath.Join(d, "x"), d
			},
		},
		{
			name: "gitdir pointer with CRLF and spaces",
			build: func(t *testing.T, base string) (string, string) {
				main := filepath.Join(base, "main")
				wtGit := filepath.Join(main, ".git", "worktrees", "wt")
				wt := filepath.Join(base, "wt")
				mkdirs(t, wtGit, wt)
				writeFile(t, wtGit, "commondir", "../..\r\n")
				writeFile(t, wt, ".git", "gitdir:   "+wtGit+"  \r\n")
				return wt, main
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from, want := tt.build(t, tempBase(t))
			if got := CheckoutStoreDir(from); got != store(want) {
				t.Errorf("CheckoutStoreDir(%s) = %s, want %s", from, got, store(want))
			}
		})
	}
}

func TestCheckoutStoreDirRelative(t *testing.T) {
	base := tempBase(t)
	mkdirs(t, filepath.Join(base, "repo", ".git"), filepath.Join(base, "repo", "sub"))
	t.Chdir(filepath.Join(base, "repo", "sub"))
	if got, want := CheckoutStoreDir("."), store(filepath.Join(base, "repo")); got != want {
		t.Errorf("CheckoutStoreDir(.) = %s, want %s", got, want)
	}
}

// gitRun runs git with a hermetic configuration.
func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	full := append([]string{"-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main"}, args...)
	cmd := exec.Command("git", full...)
	cmd.Dir = dir
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestCheckoutStoreDirRealWorktree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not on PATH")
	}
	base := tempBase(t)
	main := filepath.Join(base, "main")
	mkdirs(t, filepath.Join(main, "pkg", "deep"))
	gitRun(t, main, "init", "-q")
	gitRun(t, main, "commit", "-q", "--allow-empty", "-m", "init")
	wt := filepath.Join(base, "worktrees", "feature")
	gitRun(t, main, "worktree", "add", "-q", "-b", "feature", wt)
	mkdirs(t, filepath.Join(wt, "sub", "dir"))

	// A second, unrelated repository that GIT_DIR / GIT_WORK_TREE point at,
	// as a git hook would export them.
	other := filepath.Join(base, "other")
	mkdirs(t, other)
	gitRun(t, other, "init", "-q")

	want := store(main)
	home := filepath.Join(base, "home")
	mkdirs(t, home)
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "")
	user := filepath.Join(home, ".local", "state", "durable-lease", "leases")
	froms := []string{main, filepath.Join(main, "pkg", "deep"), wt, filepath.Join(wt, "sub", "dir")}
	check := func(t *testing.T) {
		for _, from := range froms {
			if got := CheckoutStoreDir(from); got != want {
				t.Errorf("CheckoutStoreDir(%s) = %s, want the main checkout's %s", from, got, want)
			}
			// The default store is the user's, whatever the directory.
			if got, err := ResolveStore("", "", from); err != nil || got != user {
				t.Errorf("ResolveStore(\"\", \"\", %s) = %s, %v; want the user's store %s", from, got, err, user)
			}
		}
	}
	t.Run("plain", check)
	t.Run("GIT_DIR and GIT_WORK_TREE are ignored", func(t *testing.T) {
		t.Setenv("GIT_DIR", filepath.Join(other, ".git"))
		t.Setenv("GIT_WORK_TREE", other)
		check(t)
	})
	t.Run("the worktree's .git is a file", func(t *testing.T) {
		fi, err := os.Stat(filepath.Join(wt, ".git"))
		if err != nil || fi.IsDir() {
			t.Fatalf("expected a .git file in the linked worktree: %v", err)
		}
	})
}

func TestResolveStore(t *testing.T) {
	base := tempBase(t)
	repo := filepath.Join(base, "repo")
	mkdirs(t, filepath.Join(repo, ".git"), filepath.Join(repo, "sub"))
	cwd := filepath.Join(repo, "sub")
	mkdirs(t, filepath.Join(base, "home"))
	t.Setenv("HOME", filepath.Join(base, "home"))
	t.Setenv("XDG_STATE_HOME", "")
	tests := []struct {
		name, flag, env, want string
	}{
		{"default: the user's store, not the checkout's", "", "", filepath.Join(base, "home", ".local", "state", "durable-lease", "leases")},
		{"env absolute", "", "/srv/leases", "/srv/leases"},
		{"env relative to cwd", "", "shared/leases", filepath.Join(cwd, "shared", "leases")},
		{"flag absolute", "/var/leases", "", "/var/leases"},
		{"flag relative to cwd", "my-store", "", filepath.Join(cwd, "my-store")},
		{"flag beats env", "/from/flag", "/from/env", "/from/flag"},
		{"relative flag beats env", "../x", "/from/env", filepath.Join(repo, "x")},
		{"paths are cleaned", "/a/b/../c/", "", "/a/c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := ResolveStore(tt.flag, tt.env, cwd); err != nil || got != tt.want {
				t.Errorf("ResolveStore(%q, %q, cwd) = %s, %v; want %s", tt.flag, tt.env, got, err, tt.want)
			}
		})
	}
}

// TestUserStoreDir: the default store is under XDG_STATE_HOME when that
// is absolute, else under an existing HOME; with neither there is none,
// and the error says how to name one.
func TestUserStoreDir(t *testing.T) {
	base := tempBase(t)
	home := filepath.Join(base, "home")
	mkdirs(t, home)
	writeFile(t, base, "afile", "not a directory")
	tests := []struct {
		name, xdg, home, want string
	}{
		{"HOME", "", home, filepath.Join(home, ".local", "state", "durable-lease", "leases")},
		{"XDG_STATE_HOME beats HOME", "/srv/state", home, "/srv/state/durable-lease/leases"},
		{"XDG_STATE_HOME need not exist yet", filepath.Join(base, "nostate"), "", filepath.Join(base, "nostate", "durable-lease", "leases")},
		{"a relative XDG_STATE_HOME is ignored", "state", home, filepath.Join(home, ".local", "state", "durable-lease", "leases")},
		{"no HOME", "", "", ""},
		{"a relative HOME", "", "home", ""},
		{"a HOME that does not exist", "", filepath.Join(base, "gone"), ""},
		{"a HOME that is a file", "", filepath.Join(base, "afile"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"XDG_STATE_HOME": tt.xdg, "HOME": tt.home}
			got, err := UserStoreDir(func(k string) string { return env[k] })
			switch {
			case tt.want == "" && (err == nil || !errors.Is(err, ErrNoDefaultStore) || !strings.Contains(err.Error(), "LEASE_STORE")):
				t.Errorf("UserStoreDir = %q, %v; want ErrNoDefaultStore naming LEASE_STORE", got, err)
			case tt.want != "" && (err != nil || got != tt.want):
				t.Errorf("UserStoreDir = %q, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// A FIFO at a .git on the way up (anyone can make one in a sticky /tmp)
// does not block finding the checkout store: it is no pointer file.
func TestCheckoutStoreDirPastAFIFO(t *testing.T) {
	base := tempBase(t)
	dir := filepath.Join(base, "work")
	mkdirs(t, dir)
	if err := syscall.Mkfifo(filepath.Join(base, ".git"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() { done <- CheckoutStoreDir(dir) }()
	select {
	case got := <-done:
		if got != store(base) {
			t.Errorf("CheckoutStoreDir = %s, want %s (the FIFO's directory, as for any unreadable .git file)", got, store(base))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CheckoutStoreDir blocked on a FIFO at .git")
	}
}
