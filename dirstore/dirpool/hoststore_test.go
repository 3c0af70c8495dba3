package dirpool

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/pool"
)

// poolFile writes a pool file of the given body in a directory of its own
// and loads it.
func poolFile(t *testing.T, body string) *pool.Config {
	t.Helper()
	pf := filepath.Join(t.TempDir(), "pool.json")
	if err := os.WriteFile(pf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := pool.LoadFile(pf)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// storeDir is a store directory that exists.
func storeDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// registryBase is a fresh directory for a host registry, as /tmp is:
// every user may write it, and its sticky bit keeps entries their owner's.
func registryBase(t *testing.T) HostRegistry {
	t.Helper()
	d := filepath.Join(t.TempDir(), "tmp")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	return HostRegistry{Base: d, Named: true}
}

const onePool = `{"name":"p","slots":[{"id":1,"port":41010}]}`

func me() uint32 { return uint32(os.Geteuid()) }

func myDir(r HostRegistry) string {
	return filepath.Join(r.Base, registryPrefix+strconv.FormatUint(uint64(me()), 10))
}

// A claim is written as the user's own, in the user's directory (0755,
// files 0644 whatever the umask, so that other users can read them), and
// a second call on the same store writes nothing.
func TestHostRegistryClaimsForTheUser(t *testing.T) {
	t.Parallel()
	r := registryBase(t)
	c := poolFile(t, onePool)
	store := storeDir(t)
	if err := ClaimHostStore(r, c, store, true, time.Now(), true); err != nil {
		t.Fatal(err)
	}
	dir := myDir(r)
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the user's registry %s: %v %v, want a directory 0755", dir, fi, err)
	}
	file := filepath.Join(dir, c.Name+"-"+c.Identity()+".json")
	cl := readClaim(file, me(), c.Identity())
	if cl == nil || cl.State != stateServing || cl.Store != store || cl.PoolFile != c.File || !cl.Default {
		t.Fatalf("the claim: %+v", cl)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o644 {
		t.Errorf("the claim's mode is %v, want 0644", fi.Mode().Perm())
	}
	before, _ := os.Stat(file)
	if err := ClaimHostStore(r, c, store, true, time.Now().Add(time.Minute), true); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(file); !os.SameFile(before, after) {
		t.Error("an unchanged claim was written again")
	}
	// A read records nothing.
	other := poolFile(t, `{"name":"q","slots":[{"id":1}]}`)
	if err := ClaimHostStore(r, other, store, true, time.Now(), false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, other.Name+"-"+other.Identity()+".json")); err == nil {
		t.Error("a read claimed the pool")
	}
}

// Two default stores of one user (another XDG_STATE_HOME or HOME): the
// second is refused while the first is in use, and the same store reached
// through a link is no conflict; a store named on purpose replaces the
// claim, and an edited pool file's older claim is forgotten.
func TestHostRegistryOneUsersDefaultStores(t *testing.T) {
	t.Parallel()
	r := registryBase(t)
	c := poolFile(t, onePool)
	first, second := storeDir(t), storeDir(t)
	if err := ClaimHostStore(r, c, first, true, time.Now(), true); err != nil {
		t.Fatal(err)
	}
	for _, register := range []bool{true, false} {
		err := ClaimHostStore(r, c, second, true, time.Now(), register)
		if !errors.Is(err, pool.ErrStoreConflict) || !strings.Contains(err.Error(), first) {
			t.Errorf("a second default store (register %v): %v, want a conflict naming %s", register, err, first)
		}
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(first, link); err != nil {
		t.Fatal(err)
	}
	if err := ClaimHostStore(r, c, link, true, time.Now(), true); err != nil {
		t.Errorf("the same store through a link: %v", err)
	}
	if err := ClaimHostStore(r, c, second, false, time.Now(), true); err != nil {
		t.Errorf("a store named on purpose: %v", err)
	}
	// Once the first store is gone, a default store takes over.
	if err := ClaimHostStore(r, c, first, true, time.Now(), true); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(first); err != nil {
		t.Fatal(err)
	}
	if err := ClaimHostStore(r, c, second, true, time.Now(), true); err != nil {
		t.Errorf("after the first store was removed: %v", err)
	}
	// The pool file edited (another slot): one claim, of the new pool.
	if err := os.WriteFile(c.File, []byte(`{"name":"p","slots":[{"id":1,"port":41010},{"id":2,"port":41020}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	edited, err := pool.LoadFile(c.File)
	if err != nil {
		t.Fatal(err)
	}
	if err := ClaimHostStore(r, edited, second, true, time.Now(), true); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(myDir(r))
	var claims []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			claims = append(claims, e.Name())
		}
	}
	if len(claims) != 1 || claims[0] != edited.Name+"-"+edited.Identity()+".json" {
		t.Errorf("claims after the edit: %v, want only the edited pool's", claims)
	}
}

// The registry's directory must be one nobody can turn against its
// users: in a directory others can write without the sticky bit, or not
// a directory, a named registry is a usage error and the default one is
// skipped; a user's directory that is not theirs, or that others could
// write, is not believed and a directory of the user's own is made
// beside it; nothing is written through a symbolic link.
func TestHostRegistryRefusesWhatOthersCouldChange(t *testing.T) {
	t.Parallel()
	c := poolFile(t, onePool)
	store := storeDir(t)

	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{open, file, "relative/tmp", filepath.Join(t.TempDir(), "missing")} {
		if err := ClaimHostStore(HostRegistry{Base: base, Named: true}, c, store, true, time.Now(), true); !errors.Is(err, pool.ErrInvalid) {
			t.Errorf("registry in %s: %v, want a usage error", base, err)
		}
		if err := ClaimHostStore(HostRegistry{Base: base}, c, store, true, time.Now(), true); err != nil {
			t.Errorf("the default registry in %s: %v, want the check skipped", base, err)
		}
	}
	if entries, _ := os.ReadDir(open); len(entries) != 0 {
		t.Errorf("written in a directory anyone can write: %v", entries)
	}

	// The user's name taken by a symbolic link and then by an open
	// directory: neither is used, and the claim lands in a directory of
	// the user's own.
	for _, plant := range []string{"symlink", "open directory"} {
		r := registryBase(t)
		elsewhere := t.TempDir()
		switch plant {
		case "symlink":
			if err := os.Symlink(elsewhere, myDir(r)); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.Mkdir(myDir(r), 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(myDir(r), 0o777); err != nil {
				t.Fatal(err)
			}
		}
		if err := ClaimHostStore(r, c, store, true, time.Now(), true); err != nil {
			t.Fatalf("%s: %v", plant, err)
		}
		if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
			t.Errorf("%s: written through the link: %v", plant, entries)
		}
		if entries, _ := os.ReadDir(myDir(r)); plant != "symlink" && len(entries) != 0 {
			t.Errorf("%s: written in the planted directory: %v", plant, entries)
		}
		dirs, err := userDirs(r.Base)
		if err != nil || len(dirs[me()]) != 1 || !strings.HasPrefix(filepath.Base(dirs[me()][0]), registryPrefix+strconv.FormatUint(uint64(me()), 10)+"-") {
			t.Fatalf("%s: the user's directories: %v %v, want one of a name of its own", plant, dirs, err)
		}
		if readClaim(filepath.Join(dirs[me()][0], c.Name+"-"+c.Identity()+".json"), me(), c.Identity()) == nil {
			t.Errorf("%s: no claim in %s", plant, dirs[me()][0])
		}
		// ... and found there the next time.
		if err := ClaimHostStore(r, c, storeDir(t), true, time.Now(), true); !errors.Is(err, pool.ErrStoreConflict) {
			t.Errorf("%s: the claim in the user's own directory was not found again: %v", plant, err)
		}
	}
}

// otherUser is the uid the tests plant other users' entries as (root
// can give files away; nobody else can).
const otherUser = 65534

// plantClaim makes, in r, the registry directory dirName owned by owner
// holding the claim file name with content cl (or, with fifo, a FIFO).
func plantClaim(t *testing.T, r HostRegistry, dirName string, owner int, name string, cl any, fifo bool) string {
	t.Helper()
	d := filepath.Join(r.Base, dirName)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d, name)
	if fifo {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	} else {
		data, _ := json.Marshal(cl)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{d, p} {
		if err := os.Lchown(q, owner, owner); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// Another user's claim: a live one on another store refuses the pool,
// with that user, their store and the group store recipe named, and
// nothing of this user's is left claimed; the same store (a group store)
// is shared. Claims that cannot be believed (in a directory of another
// owner than the uid it names, of another uid than the directory's, a
// FIFO, of a store or pool file that is gone, a pending one long dead)
// are passed over. Root only: it plants files of another uid's.
func TestHostRegistryOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("plants another user's files: needs root (internal/testkit/hosttest runs two real users)")
	}
	t.Parallel()
	c := poolFile(t, onePool)
	name := c.Name + "-" + c.Identity() + ".json"
	theirs := storeDir(t)
	otherPool := poolFile(t, onePool)
	// A claim written at "at" (the zero time: long ago).
	claimOf := func(uid int, store, state string, at time.Time) claim {
		cl := claim{V: 2, UID: uint32(uid), Pool: c.Name, Identity: c.Identity(), Store: store,
			PoolFile: otherPool.File, State: state, Since: "2026-01-01T00:00:00.000Z"}
		if !at.IsZero() {
			cl.At = at.UTC().Format(time.RFC3339Nano)
		}
		return cl
	}
	var long time.Time
	otherDir := registryPrefix + strconv.Itoa(otherUser)
	now := time.Now()

	r := registryBase(t)
	plantClaim(t, r, otherDir, otherUser, name, claimOf(otherUser, theirs, stateServing, long), false)
	mine := storeDir(t)
	for _, register := range []bool{true, false} {
		err := ClaimHostStore(r, c, mine, true, now, register)
		if !errors.Is(err, pool.ErrStoreConflict) {
			t.Fatalf("register %v: %v, want a conflict", register, err)
		}
		for _, want := range []string{"uid 65534", theirs, "sudo install -d -m 2770 -o root -g GROUP", `"store": "/srv/leases"`, filepath.Join(r.Base, otherDir, name)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal does not name %q: %v", want, err)
			}
		}
	}
	if cl := readClaim(filepath.Join(myDir(r), name), me(), c.Identity()); cl != nil {
		t.Errorf("the refused command left its claim: %+v", cl)
	}
	// The same store, as a group store is for its users: shared.
	if err := ClaimHostStore(r, c, theirs, false, now, true); err != nil {
		t.Errorf("the other user's store itself: %v", err)
	}
	// A claim just written counts even before its store is made (the
	// command makes it next).
	r = registryBase(t)
	plantClaim(t, r, otherDir, otherUser, name, claimOf(otherUser, filepath.Join(t.TempDir(), "not-yet"), stateServing, now), false)
	if err := ClaimHostStore(r, c, mine, true, now, true); !errors.Is(err, pool.ErrStoreConflict) {
		t.Errorf("beside a claim just written, its store not made yet: %v, want a conflict", err)
	}
	// A pending claim of theirs stops a newcomer, but not a user already
	// serving the pool; one long pending is a command that died.
	r = registryBase(t)
	plantClaim(t, r, otherDir, otherUser, name, claimOf(otherUser, theirs, statePending, now), false)
	if err := ClaimHostStore(r, c, mine, true, now, true); !errors.Is(err, pool.ErrStoreConflict) {
		t.Errorf("a newcomer beside a pending claim: %v, want a conflict", err)
	}
	if err := ClaimHostStore(r, c, mine, true, now.Add(pendingStale+time.Second), true); err != nil {
		t.Errorf("beside a dead pending claim: %v", err)
	}
	plantClaim(t, r, otherDir, otherUser, name, claimOf(otherUser, theirs, statePending, now.Add(pendingStale+time.Second)), false)
	if err := ClaimHostStore(r, c, mine, true, now.Add(pendingStale+time.Second), true); err != nil {
		t.Errorf("a user serving the pool, beside another's pending claim: %v", err)
	}

	for _, tc := range []struct {
		name    string
		dir     string
		owner   int
		cl      claim
		fifo    bool
		removed string // a path removed before the call
	}{
		{"a directory of theirs named for root", registryPrefix + "0", otherUser, claimOf(0, theirs, stateServing, now), false, ""},
		{"a claim naming root in their directory", otherDir, otherUser, claimOf(0, theirs, stateServing, now), false, ""},
		{"a directory named for them that root owns", otherDir, 0, claimOf(otherUser, theirs, stateServing, now), false, ""},
		{"a FIFO", otherDir, otherUser, claim{}, true, ""},
		{"their store is gone", otherDir, otherUser, claimOf(otherUser, filepath.Join(t.TempDir(), "gone"), stateServing, long), false, ""},
		{"their pool file is gone", otherDir, otherUser, claimOf(otherUser, theirs, stateServing, long), false, otherPool.File},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := registryBase(t)
			plantClaim(t, r, tc.dir, tc.owner, name, tc.cl, tc.fifo)
			if tc.removed != "" {
				saved, _ := os.ReadFile(tc.removed)
				if err := os.Remove(tc.removed); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = os.WriteFile(tc.removed, saved, 0o600) })
			}
			done := make(chan error, 1)
			go func() { done <- ClaimHostStore(r, c, mine, true, now, true) }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%v, want the claim passed over", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("still running after 10 s (blocked on a planted file?)")
			}
		})
	}
}

// makeUserDir gives the directory exactly 0755 whatever the umask: a
// umask of 077 would otherwise hide the user's claims from every other
// user, and the check would pass them by.
func TestHostRegistryDirectoryModeWhateverTheUmask(t *testing.T) {
	r := registryBase(t)
	old := unix.Umask(0o077)
	d, err := makeUserDir(r.Base, me())
	unix.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(d); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("%s: %v %v, want 0755", d, fi, err)
	}
}
