package dirstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/durable-lease/durable-lease/internal/sys/storefile"
	"github.com/durable-lease/durable-lease/lease"
)

// The store check's rule on owner, group and mode, for a process of uid
// 1000 in groups 1000 and 50, on an account database where group 1000 is
// alice's private group, 50 is shared by alice and bob, and 60 is listed
// nowhere (a directory service).
func TestJudgeStoreDir(t *testing.T) {
	const alice, bob = 1000, 1001
	db := &accountDB{
		users:   map[uint32]string{0: "root", alice: "alice", bob: "bob"},
		primary: map[uint32][]uint32{0: {0}, 1000: {alice}, 1001: {bob}},
		groups:  map[uint32]string{0: "root", 1000: "alice", 1001: "bob", 50: "ci"},
		members: map[uint32][]string{50: {"alice", "bob"}},
		known:   map[uint32]bool{0: true, 1000: true, 1001: true, 50: true},
	}
	me := uint32(alice)
	id := identity{euid: &me, db: db, groups: func(g uint32) bool { return g == 1000 || g == 50 }}
	for _, c := range []struct {
		name          string
		uid, gid      uint32
		mode          uint32
		want          storefile.Perm
		refused, says string
	}{
		{"own private store", alice, 1000, 0o700, storefile.Private, "", ""},
		{"own store of the Node tool", alice, 1000, 0o755, storefile.Private, "", ""},
		{"root's read-only store", 0, 0, 0o755, storefile.Private, "", ""},
		{"umask 002 with a private group", alice, 1000, 0o775, storefile.Private, "", ""},
		{"group store made by root", 0, 50, 0o2770, storefile.Group, "", ""},
		{"group store made by the user", alice, 50, 0o2770, storefile.Group, "", ""},
		{"another user's store", bob, 1001, 0o700, 0, "another user", "owner bob, uid 1001"},
		{"another user's group store", bob, 50, 0o2770, 0, "another user", "have root make it a group store"},
		{"world-writable", alice, 1000, 0o777, 0, "writable by every user", "chmod 700"},
		{"world-writable and sticky", 0, 0, 0o1777, 0, "writable by every user", "mode 1777"},
		{"group-writable, shared group, no setgid", alice, 50, 0o770, 0, "without being a group store", "chmod 2770"},
		{"group-writable, unlisted group", alice, 60, 0o770, 0, "without being a group store", "gid 60"},
		{"group store of a group the user is not in", 0, 1001, 0o2770, 0, "group you are not in", "group bob, gid 1001"},
	} {
		t.Run(c.name, func(t *testing.T) {
			perm, exists, err := judgeStoreDir("/s", c.uid, c.gid, c.mode, id)
			if !exists {
				t.Fatal("exists is false for a directory that is there")
			}
			if c.refused == "" {
				if err != nil || perm != c.want {
					t.Fatalf("got %o, %v; want %o, accepted", perm, err, c.want)
				}
				return
			}
			if !errors.Is(err, ErrUnsafeStore) {
				t.Fatalf("got %v, want ErrUnsafeStore", err)
			}
			for _, s := range []string{c.refused, c.says, "/s"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
	// Root judges as anyone does, but may use a group store of any group
	// (it made it, or chose to).
	root := uint32(0)
	rid := identity{euid: &root, db: db, groups: func(uint32) bool { return false }}
	if perm, _, err := judgeStoreDir("/s", 0, 50, 0o2770, rid); err != nil || perm != storefile.Group {
		t.Errorf("root on a group store: %o, %v", perm, err)
	}
	if _, _, err := judgeStoreDir("/s", bob, 1001, 0o700, rid); !errors.Is(err, ErrUnsafeStore) {
		t.Errorf("root on bob's store: %v, want refused", err)
	}
}

func TestReadAccounts(t *testing.T) {
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	group := filepath.Join(dir, "group")
	os.WriteFile(passwd, []byte("# comment\nroot:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\nbob:x:1001:50::/:/bin/sh\nbroken\n"), 0o600)
	os.WriteFile(group, []byte("root:x:0:\nalice:x:1000:\nci:x:50:alice\nsolo:x:70:alice\n"), 0o600)
	db := readAccounts(passwd, group)
	if got := db.user(1000); got != "alice, uid 1000" {
		t.Errorf("user: %q", got)
	}
	if got := db.group(7); got != "gid 7" {
		t.Errorf("unknown group: %q", got)
	}
	for _, c := range []struct {
		gid, owner uint32
		want       bool
	}{
		{1000, 1000, true}, // alice's private group
		{50, 1000, false},  // bob's primary group, alice a member
		{70, 1000, true},   // alice its only member
		{70, 1001, false},  // alice a member, not bob's alone
		{60, 1000, false},  // not listed
	} {
		if got := db.privateGroup(c.gid, c.owner); got != c.want {
			t.Errorf("privateGroup(%d, %d) = %v, want %v", c.gid, c.owner, got, c.want)
		}
	}
}

// A store directory made by the first mutation is 0700, and every file
// 0600, whatever the umask; a store already there is judged on Open.
func TestStorePrivateWhateverTheUmask(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "logs", "leases")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open made the store: %v", err)
	}
	res, err := s.Acquire(t.Context(), lease.Request{Kind: "k", Owner: "ci-main", TTLMinutes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(t.Context(), lease.Ref{Kind: "k", Owner: "ci-main", Token: res.Record.Token}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k", "j"} {
		if _, err := s.Acquire(t.Context(), lease.Request{Kind: k, Owner: "ci-main", TTLMinutes: 1}); err != nil {
			t.Fatal(err)
		}
	}
	checkModes(t, dir, 0o700, 0o600)
	if fi, _ := os.Stat(filepath.Dir(dir)); fi.Mode().Perm() != 0o777 {
		t.Errorf("the store's parent is %v, want what the umask makes (0777 here)", fi.Mode())
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrUnsafeStore) {
		t.Fatalf("Open of a world-writable store: %v, want ErrUnsafeStore", err)
	}
}

// checkModes fails t for any directory under root (root included) whose
// mode is not dirMode, or file whose mode is not fileMode.
func checkModes(t *testing.T, root string, dirMode, fileMode os.FileMode) {
	t.Helper()
	n := 0
	err := filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		n++
		want := fileMode
		if fi.IsDir() {
			want = dirMode
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeSetgid); got != want {
			t.Errorf("%s is %v, want %v", path, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 3 {
		t.Fatalf("only %d entries under %s", n, root)
	}
}
