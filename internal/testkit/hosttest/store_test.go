package hosttest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const poolFile = `{"name": "p", "slots": [{"id": 1}, {"id": 2}], "provision": "true"}`

// verbs are a read and a write of every CLI on the store $S (the pool
// file is $P): each must refuse an unsafe store.
var verbs = [][]string{
	{"lease", "status", "--kind", "k"},
	{"lease", "acquire", "--kind", "k", "--owner", "root-ci", "--ttl", "1"},
	{"lease", "list"},
	{"pool", "--pool", "$P", "status"},
	{"pool", "--pool", "$P", "acquire", "--owner", "root-ci", "--no-wait"},
	{"pool-run", "--kind", "k", "--", "true"},
	{"pool-run", "--pool", "$P", "--", "true"},
}

// refused runs every verb against the store dir, as u, and checks that
// each is refused as an unsafe store with an error that says why, and
// that nothing under top changed.
func refused(t *testing.T, u user, top, dir, why string) {
	t.Helper()
	before := listing(t, top)
	pf := filepath.Join(scratch(t), "pool.json")
	if err := os.WriteFile(pf, []byte(poolFile), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, v := range verbs {
		args := make([]string, len(v)-1)
		for i, a := range v[1:] {
			args[i] = strings.NewReplacer("$P", pf).Replace(a)
		}
		r := run(t, u, top, 0o022, []string{"LEASE_STORE=" + dir}, v[0], args...)
		if r.exit != 2 {
			t.Errorf("%v: exit %d, want 2\nstdout: %s\nstderr: %s", v, r.exit, r.stdout, r.stderr)
			continue
		}
		text := r.stderr
		if v[0] != "pool-run" {
			out := r.json(t)
			if out["code"] != "unsafe_store" || out["ok"] != false {
				t.Errorf("%v: %s, want ok:false, code unsafe_store", v, r.stdout)
			}
			text, _ = out["error"].(string)
		}
		if !strings.Contains(text, "unsafe store") || !strings.Contains(text, why) {
			t.Errorf("%v: the error does not say %q:\n%s", v, why, text)
		}
		if strings.Contains(r.stderr, "for usage") {
			t.Errorf("%v: an unsafe store is not a usage mistake:\n%s", v, r.stderr)
		}
	}
	if after := listing(t, top); after != before {
		t.Errorf("the refused commands changed the files:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// A store another user made, wherever it is, is refused before anything
// is read or written: as root on a directory nobody planted (the README
// once suggested /dev/shm/leases, which anyone can create first), and
// through a symbolic link to one.
func TestAnotherUsersStoreIsRefused(t *testing.T) {
	needRoot(t)
	top := scratch(t)
	if err := os.Chmod(top, 0o777|os.ModeSticky); err != nil { // as /tmp and /dev/shm are
		t.Fatal(err)
	}
	mustRun(t, asNobody, top, nil, "mkdir", "planted")
	mustRun(t, asNobody, top, nil, "sh", "-c", "echo '{}' > planted/k.json")
	refused(t, nil, top, filepath.Join(top, "planted"), "belongs to another user (you are root, uid 0)")
	refused(t, nil, top, filepath.Join(top, "planted"), "owner nobody, uid 65534")
	if err := os.Symlink(filepath.Join(top, "planted"), filepath.Join(top, "link")); err != nil {
		t.Fatal(err)
	}
	refused(t, nil, top, filepath.Join(top, "link"), "belongs to another user")
}

// A store writable by every user, or by a group without being a group
// store, is refused too; so is a group store of a group the user is not
// in.
func TestWritableByOthersIsRefused(t *testing.T) {
	needRoot(t)
	top := scratch(t)
	for name, mode := range map[string]os.FileMode{"open": 0o777, "sticky": 0o777 | os.ModeSticky} {
		dir := filepath.Join(top, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		refused(t, nil, top, dir, "is writable by every user")
	}
	// nogroup is nobody's primary group: not root's private group.
	shared := filepath.Join(top, "shared")
	if err := os.Mkdir(shared, 0o770); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(shared, 0, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o770); err != nil {
		t.Fatal(err)
	}
	refused(t, nil, top, shared, "writable by its group without being a group store")
	// A group store of daemon's group (gid 1, Debian's), which nobody is
	// not in. (One of root's private group would be safe for nobody: only
	// root could write it.)
	other := filepath.Join(top, "othergroup")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(other, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(other, 0o770|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	refused(t, asNobody, top, other, "a group store of a group you are not in")
}

// What the CLIs make is private whatever the umask: the store directory
// 0700 and every file and directory in it 0600 and 0700, so another user
// cannot read a token.
func TestStoreIsPrivateWhateverTheUmask(t *testing.T) {
	needRoot(t)
	top := scratch(t)
	store := filepath.Join(top, "logs", "leases")
	pf := filepath.Join(top, "pool.json")
	if err := os.WriteFile(pf, []byte(poolFile), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"LEASE_STORE=" + store}
	for _, args := range [][]string{
		{"lease", "acquire", "--kind", "k", "--owner", "root-ci", "--ttl", "1"},
		{"lease", "release", "--kind", "k", "--owner", "root-ci", "--force"}, // the journal
		{"lease", "acquire", "--kind", "k", "--owner", "root-ci", "--ttl", "1"},
		{"pool", "--pool", pf, "acquire", "--owner", "root-ci", "--no-wait"},
		{"pool", "--pool", pf, "request", "--owner", "root-ci"}, // a grant file
	} {
		r := run(t, nil, top, 0o000, env, args[0], args[1:]...)
		if r.exit != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, r.exit, r.stdout, r.stderr)
		}
	}
	// The detached waiter grants the request (slot 2) and records a nudge.
	waitFor(t, func() bool {
		_, err := os.Stat(filepath.Join(store, "p", "nudges.jsonl"))
		return err == nil
	})
	seen := checkTree(t, top, store, 0o600, os.ModeDir|0o700, -1)
	for _, name := range []string{"k.json", "reaped.log", "p", "queue.json", "grants", "pool.log", "nudges.jsonl"} {
		if !seen[name] {
			t.Errorf("no %s was made, so its mode was not checked (saw %v)", name, seen)
		}
	}
	if fi, err := os.Stat(filepath.Join(top, "logs")); err != nil || fi.Mode().Perm() != 0o777 {
		t.Errorf("the store's parent is %v (%v), want what the umask makes of 0777", fi.Mode(), err)
	}
	// nobody can read none of it: not the record, not through the CLI.
	if r := run(t, asNobody, top, 0o022, nil, "cat", filepath.Join(store, "k.json")); r.exit == 0 {
		t.Errorf("nobody read the record: %s", r.stdout)
	}
	rec, err := os.ReadFile(filepath.Join(store, "k.json"))
	if err != nil {
		t.Fatal(err)
	}
	token := between(string(rec), `"token":"`, `"`)
	r := run(t, asNobody, top, 0o022, env, "lease", "status", "--kind", "k", "--reveal-tokens")
	if r.exit == 0 || strings.Contains(r.stdout+r.stderr, token) {
		t.Errorf("nobody's lease status: exit %d, shows the token: %v\n%s%s", r.exit, strings.Contains(r.stdout+r.stderr, token), r.stdout, r.stderr)
	}
}

// A store made by the Node tool, or by this one before, for the same user
// (0755 with 0644 files) keeps working, and what is rewritten in it
// becomes 0600.
func TestOlderStoreOfTheSameUserWorks(t *testing.T) {
	top := scratch(t)
	store := filepath.Join(top, "store")
	if err := os.Mkdir(store, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "reaped.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"LEASE_STORE=" + store}
	mustRun(t, nil, top, env, "lease", "acquire", "--kind", "k", "--owner", "ci", "--ttl", "1")
	mustRun(t, nil, top, env, "lease", "release", "--kind", "k", "--owner", "ci", "--force")
	for name, want := range map[string]os.FileMode{".": os.ModeDir | 0o755, "reaped.log": 0o600} {
		fi, err := os.Stat(filepath.Join(store, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s is %v, want %v", name, fi.Mode(), want)
		}
	}
}

// A group store, one directory of mode 2770 with a group, is shared by
// the users of its group: root and nobody (whose group it is) both take
// and see leases and a pool's slots there; every file is 0660 and every
// directory 2770, all of the group, whoever made it and whatever their
// umask.
func TestGroupStoreIsShared(t *testing.T) {
	needRoot(t)
	top := scratch(t)
	store := filepath.Join(top, "group-store")
	if err := os.Mkdir(store, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(store, 0, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(store, 0o770|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	pf := filepath.Join(top, "pool.json")
	if err := os.WriteFile(pf, []byte(poolFile), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"LEASE_STORE=" + store}
	mustRun(t, nil, top, env, "lease", "acquire", "--kind", "r", "--owner", "root-ci", "--ttl", "1")
	nb := run(t, asNobody, top, 0o022, env, "lease", "acquire", "--kind", "n", "--owner", "nobody-ci", "--ttl", "1")
	if nb.exit != 0 {
		t.Fatalf("nobody's acquire in the group store: exit %d\n%s%s", nb.exit, nb.stdout, nb.stderr)
	}
	// Each sees, and is refused, the other's lease.
	if r := run(t, asNobody, top, 0o022, env, "lease", "acquire", "--kind", "r", "--owner", "nobody-ci", "--ttl", "1"); r.exit != 1 || r.json(t)["code"] != "held" {
		t.Errorf("nobody took root's lease: exit %d %s%s", r.exit, r.stdout, r.stderr)
	}
	if r := run(t, nil, top, 0o077, env, "lease", "acquire", "--kind", "n", "--owner", "root-ci", "--ttl", "1"); r.exit != 1 || r.json(t)["code"] != "held" {
		t.Errorf("root took nobody's lease: exit %d %s%s", r.exit, r.stdout, r.stderr)
	}
	// Slots of one pool, one to each user, and nobody's released by
	// nobody after root rewrote the queue.
	mustRun(t, nil, top, env, "pool", "--pool", pf, "acquire", "--owner", "root-ci", "--no-wait")
	g := run(t, asNobody, top, 0o022, env, "pool", "--pool", pf, "acquire", "--owner", "nobody-ci", "--no-wait")
	if g.exit != 0 || g.json(t)["slot"] != float64(2) {
		t.Fatalf("nobody's slot: exit %d %s%s", g.exit, g.stdout, g.stderr)
	}
	tok := g.json(t)["token"].(string)
	if r := run(t, asNobody, top, 0o022, env, "pool", "--pool", pf, "release", "--slot", "2", "--owner", "nobody-ci", "--token", tok); r.exit != 0 {
		t.Errorf("nobody's release: exit %d %s%s", r.exit, r.stdout, r.stderr)
	}
	checkTree(t, top, store, 0o660, os.ModeDir|os.ModeSetgid|0o770, nobody)
}

// checkTree fails t for any file under root whose mode (type, permission
// and set-group-ID bits) is not file, or directory (root included) not
// dir, or, if gid is not -1, whose group is not gid; names are shown
// relative to top. It returns the base names it saw.
func checkTree(t *testing.T, top, root string, file, dir os.FileMode, gid int) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		seen[filepath.Base(path)] = true
		want := file
		if fi.IsDir() {
			want = dir
		}
		if got := fi.Mode() & (os.ModeType | os.ModePerm | os.ModeSetgid); got != want {
			t.Errorf("%s is %v, want %v", strings.TrimPrefix(path, top), got, want)
		}
		if g := fi.Sys().(*syscall.Stat_t).Gid; gid >= 0 && g != uint32(gid) {
			t.Errorf("%s has group %d, want the store's (%d)", strings.TrimPrefix(path, top), g, gid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return seen
}

func between(s, from, to string) string {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return "\x00none"
	}
	v, _, _ := strings.Cut(rest, to)
	return v
}

// A symbolic link another user planted at the store's path is refused,
// even when it points at a directory of the user's own (it could be
// pointed elsewhere at any moment); the directory is left alone.
func TestPlantedSymlinkIsRefused(t *testing.T) {
	needRoot(t)
	top := scratch(t)
	if err := os.Chmod(top, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(top, "rootdir")
	if err := os.Mkdir(mine, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mine, "app.json"), []byte("root's own file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustRun(t, asNobody, top, nil, "ln", "-s", mine, filepath.Join(top, "leases"))
	refused(t, nil, top, filepath.Join(top, "leases"), "is a symbolic link of another user's (nobody, uid 65534")
	r := run(t, nil, top, 0o022, []string{"LEASE_STORE=" + filepath.Join(top, "leases")}, "lease", "reap", "--kind", "app", "--owner", "root-ci")
	if r.exit != 2 {
		t.Errorf("reap through the link: exit %d\n%s%s", r.exit, r.stdout, r.stderr)
	}
	if data, err := os.ReadFile(filepath.Join(mine, "app.json")); err != nil || string(data) != "root's own file\n" {
		t.Errorf("the directory behind the link was touched: %q %v", data, err)
	}
	// The user's own link is followed.
	own := filepath.Join(top, "own-link")
	if err := os.Symlink(mine, own); err != nil {
		t.Fatal(err)
	}
	mustRun(t, nil, top, []string{"LEASE_STORE=" + own}, "lease", "status", "--kind", "k")
}

// A file of a group store that has another name (a hard link another
// member planted to one of the user's files elsewhere) is never written
// to, widened or shown.
func TestHardLinkInAGroupStoreIsRefused(t *testing.T) {
	needRoot(t)
	top := scratch(t)
	store := filepath.Join(top, "gs")
	if err := os.Mkdir(store, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(store, 0, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(store, 0o770|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(top, "secret.conf")
	if err := os.WriteFile(secret, []byte("password=1\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	// As a member could where fs.protected_hardlinks is 0.
	for _, name := range []string{"reaped.log", ".wait-k.flock", "k.json"} {
		if err := os.Link(secret, filepath.Join(store, name)); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"LEASE_STORE=" + store}
	run(t, nil, top, 0o022, env, "lease", "release", "--kind", "j", "--owner", "root-ci", "--force")
	mustRun(t, nil, top, env, "lease", "acquire", "--kind", "h", "--owner", "root-ci", "--ttl", "1")
	run(t, nil, top, 0o022, env, "lease", "acquire", "--kind", "h", "--owner", "other", "--ttl", "1", "--wait-ms", "100")
	st := run(t, nil, top, 0o022, env, "lease", "status", "--kind", "k")
	if strings.Contains(st.stdout+st.stderr, "password") {
		t.Errorf("status showed the linked file: %s%s", st.stdout, st.stderr)
	}
	fi, err := os.Stat(secret)
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(secret); string(data) != "password=1\n" || fi.Mode().Perm() != 0o640 {
		t.Errorf("the linked file was changed: %v %q", fi.Mode(), data)
	}
}

// A user whose umask takes away its own permissions (0477, 0777) still
// gets a working store with exact modes.
func TestRestrictiveUmask(t *testing.T) {
	needRoot(t)
	top := scratch(t)
	if err := os.Chown(top, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	pf := filepath.Join(top, "pool.json")
	if err := os.WriteFile(pf, []byte(poolFile), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, umask := range []int{0o477, 0o777} {
		store := filepath.Join(top, fmt.Sprintf("store-%o", umask))
		env := []string{"LEASE_STORE=" + store}
		for _, args := range [][]string{
			{"lease", "acquire", "--kind", "k", "--owner", "ci", "--ttl", "1"},
			{"lease", "release", "--kind", "k", "--owner", "ci", "--force"},
			{"lease", "acquire", "--kind", "k", "--owner", "ci", "--ttl", "1"},
			{"pool", "--pool", pf, "acquire", "--owner", "ci", "--no-wait"},
		} {
			if r := run(t, asNobody, top, umask, env, args[0], args[1:]...); r.exit != 0 {
				t.Fatalf("umask %04o, %v: exit %d\n%s%s", umask, args, r.exit, r.stdout, r.stderr)
			}
		}
		t.Logf("umask %04o", umask)
		checkTree(t, top, store, 0o600, os.ModeDir|0o700, -1)
	}
}
