package hosttest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/durable-lease/durable-lease/pool"
)

// userSetup is one user's side of a host: a home and a copy of the
// worked example (examples/pool: a pool file naming no store, its
// provisioner and health check) in a directory of the user's.
type userSetup struct {
	u    user
	dir  string   // the copy of examples/pool
	env  []string // HOME and the unreachable servers
	home string
}

// exampleFor copies examples/pool into a directory of u's (uid, for
// chown) with a home of its own.
func exampleFor(t *testing.T, u user, uid int) userSetup {
	t.Helper()
	root, err := findModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	top := scratch(t)
	dir, home := filepath.Join(top, "example"), filepath.Join(top, "home")
	for _, d := range []string{dir, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"pool.json", "provision.sh", "health.sh"} {
		data, err := os.ReadFile(filepath.Join(root, "examples", "pool", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{top, dir, home, filepath.Join(dir, "pool.json"), filepath.Join(dir, "provision.sh"), filepath.Join(dir, "health.sh")} {
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	return userSetup{u: u, dir: dir, home: home,
		env: []string{"HOME=" + home, "PGHOST=/nonexistent", "PGCONNECT_TIMEOUT=1", "REDIS_HOST=127.0.0.1", "REDIS_PORT=1"}}
}

func (s userSetup) run(t *testing.T, name string, args ...string) result {
	t.Helper()
	return run(t, s.u, s.dir, 0o022, s.env, name, args...)
}

// conflictNamed checks that r is the refusal of a pool another user's
// store serves: exit 2, code store_conflict, naming that user and the
// group store recipe.
func conflictNamed(t *testing.T, what string, r result, pool bool, other string) {
	t.Helper()
	text := r.stderr
	if pool {
		out := r.json(t)
		if out["ok"] != false || out["code"] != "store_conflict" {
			t.Errorf("%s: %s, want ok:false, code store_conflict", what, r.stdout)
		}
		text, _ = out["error"].(string)
	} else if !strings.Contains(text, "(store_conflict)") {
		t.Errorf("%s: stderr does not end with the code store_conflict:\n%s", what, text)
	}
	for _, want := range []string{"already served on this host by " + other, "install -d -m 2770 -o root -g GROUP", `"store": "/srv/leases"`} {
		if !strings.Contains(text, want) {
			t.Errorf("%s: the refusal does not say %q:\n%s", what, want, text)
		}
	}
	if r.exit != 2 {
		t.Errorf("%s: exit %d, want 2", what, r.exit)
	}
}

// ageClaims makes every claim in the registry reg look written long ago.
func ageClaims(t *testing.T, reg string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(reg, "durable-lease-pools-*", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		old := regexp.MustCompile(`"at":"[^"]*"`).ReplaceAll(data, []byte(`"at":"2026-01-01T00:00:00.000Z"`))
		if err := os.WriteFile(f, old, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Two users on one host, each with the worked example, whose slots name
// the host's ports and databases: the first to serve the pool serves it,
// and the other user's commands, on a store of their own, are refused
// with the fix (a group store) instead of handing out slot 1 again; no
// store of theirs is made. Once the first user's store is gone the pool
// is free to be served elsewhere.
func TestTwoUsersDoNotBothGrantASlot(t *testing.T) {
	needRoot(t)
	rootSide, nobodySide := exampleFor(t, nil, 0), exampleFor(t, asNobody, nobody)
	held := rootSide.run(t, "pool", "--pool", "pool.json", "acquire", "--owner", "root-ci", "--no-wait")
	if held.exit != 0 || held.json(t)["slot"] != float64(1) {
		t.Fatalf("root's acquire: exit %d %s%s", held.exit, held.stdout, held.stderr)
	}
	conflictNamed(t, "nobody's pool-run", nobodySide.run(t, "pool-run", "--pool", "pool.json", "--no-wait", "--", "true"), false, "root (uid 0)")
	conflictNamed(t, "nobody's acquire", nobodySide.run(t, "pool", "--pool", "pool.json", "acquire", "--owner", "nobody-ci", "--no-wait"), true, "root (uid 0)")
	conflictNamed(t, "nobody's status", nobodySide.run(t, "pool", "--pool", "pool.json", "status"), true, "root (uid 0)")
	if _, err := os.Stat(filepath.Join(nobodySide.home, ".local")); err == nil {
		t.Error("a refused command of nobody's made a store")
	}
	// Root goes on, from its own store.
	if r := rootSide.run(t, "pool-run", "--pool", "pool.json", "--no-wait", "--", "true"); r.exit != 0 {
		t.Errorf("root's pool-run: exit %d\n%s", r.exit, r.stderr)
	}
	// Root's store gone (its home cleaned): nobody may serve the pool.
	// (A claim counts for 30 s whatever its store, which its command
	// makes just after writing it: the claims are made older here.)
	if err := os.RemoveAll(filepath.Join(rootSide.home, ".local")); err != nil {
		t.Fatal(err)
	}
	ageClaims(t, registry(t))
	if r := nobodySide.run(t, "pool", "--pool", "pool.json", "acquire", "--owner", "nobody-ci", "--no-wait"); r.exit != 0 || r.json(t)["slot"] != float64(1) {
		t.Errorf("nobody, once root's store is gone: exit %d %s%s", r.exit, r.stdout, r.stderr)
	}
	conflictNamed(t, "root, now that nobody serves it", rootSide.run(t, "pool", "--pool", "pool.json", "status"), true, "nobody (uid 65534)")
}

// The case: both users start pool-run --no-wait at the same
// moment. However the race goes, they never both get a slot; each one
// refused says store_conflict. Each round starts from a fresh registry.
func TestTwoUsersAtOnce(t *testing.T) {
	needRoot(t)
	for round := range 6 {
		rootSide, nobodySide := exampleFor(t, nil, 0), exampleFor(t, asNobody, nobody)
		reg := filepath.Join(scratch(t), "registry")
		if err := os.Mkdir(reg, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(reg, os.ModeSticky|0o777); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		results := make([]result, 2)
		start := make(chan struct{})
		for i, s := range []userSetup{rootSide, nobodySide} {
			s.env = append(s.env, "LEASE_HOST_REGISTRY="+reg)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				// The slot is held well past the other's start.
				results[i] = s.run(t, "pool-run", "--pool", "pool.json", "--no-wait", "--", "sh", "-c", `echo "slot $POOL_RUN_SLOT"; sleep 1`)
			}()
		}
		close(start)
		wg.Wait()
		ran := 0
		for i, r := range results {
			switch {
			case r.exit == 0:
				ran++
			case r.exit != 2 || !strings.Contains(r.stderr, "(store_conflict)"):
				t.Errorf("round %d, user %d: exit %d, want 0 or 2 store_conflict\n%s", round, i, r.exit, r.stderr)
			}
		}
		t.Logf("round %d: root exit %d, nobody exit %d", round, results[0].exit, results[1].exit)
		if ran == 2 {
			t.Fatalf("round %d: both users got a slot of one pool:\nroot: %s\nnobody: %s", round, results[0].stdout, results[1].stdout)
		}
	}
}

// A pool file that names a group store (root makes it once, mode 2770,
// of a group both users are in) serves both users from one store: one
// slot each, the third caller saturated, no conflict.
func TestTwoUsersShareAGroupStore(t *testing.T) {
	needRoot(t)
	group := filepath.Join(scratch(t), "leases")
	if err := os.Mkdir(group, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(group, 0, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(group, 0o770|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	sides := []userSetup{exampleFor(t, nil, 0), exampleFor(t, asNobody, nobody)}
	for _, s := range sides {
		pf := filepath.Join(s.dir, "pool.json")
		data, err := os.ReadFile(pf)
		if err != nil {
			t.Fatal(err)
		}
		named := strings.Replace(string(data), "{\n", "{\n  \"store\": \""+group+"\",\n", 1)
		if err := os.WriteFile(pf, []byte(named), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := sides[0].run(t, "pool", "--pool", "pool.json", "acquire", "--owner", "root-ci", "--no-wait")
	b := sides[1].run(t, "pool", "--pool", "pool.json", "acquire", "--owner", "nobody-ci", "--no-wait")
	if a.exit != 0 || b.exit != 0 || a.json(t)["slot"] != float64(1) || b.json(t)["slot"] != float64(2) {
		t.Fatalf("root: exit %d %s%s\nnobody: exit %d %s%s\nwant slots 1 and 2", a.exit, a.stdout, a.stderr, b.exit, b.stdout, b.stderr)
	}
	if r := sides[1].run(t, "pool-run", "--pool", "pool.json", "--no-wait", "--", "true"); r.exit != 1 {
		t.Errorf("a third caller: exit %d, want 1 (both slots held)\n%s", r.exit, r.stderr)
	}
}

// Another user cannot speak for you in the registry: nobody makes the
// directory root's claims would go in, puts in it a claim of the pool in
// root's name, and leaves a symbolic link at another name root might
// take. Root's commands believe none of it, claim the pool in a
// directory of root's own, and nobody's next command is refused by that
// claim, the real one.
func TestAnotherUserCannotPlantAClaim(t *testing.T) {
	needRoot(t)
	rootSide, nobodySide := exampleFor(t, nil, 0), exampleFor(t, asNobody, nobody)
	reg := registry(t)
	planted := filepath.Join(reg, "durable-lease-pools-0")
	mustRun(t, asNobody, reg, nil, "mkdir", "-m", "755", planted)
	// In it, a claim named for the pool as root's would be, saying uid 0
	// serves it from a store in nobody's home.
	c, err := pool.LoadFile(filepath.Join(rootSide.dir, "pool.json"))
	if err != nil {
		t.Fatal(err)
	}
	fake := fmt.Sprintf(`{"v":2,"uid":0,"pool":%q,"identity":%q,"store":%q,"default":true,"poolFile":%q,"state":"serving","since":"2026-01-01T00:00:00.000Z"}`,
		c.Name, c.Identity(), nobodySide.home, filepath.Join(nobodySide.dir, "pool.json"))
	mustRun(t, asNobody, reg, nil, "sh", "-c", `printf '%s\n' "$1" > "$2"`, "sh", fake, filepath.Join(planted, c.Name+"-"+c.Identity()+".json"))
	mustRun(t, asNobody, reg, nil, "ln", "-s", nobodySide.home, filepath.Join(reg, "durable-lease-pools-0-0000000000000000"))
	// Root serves the pool, writing nowhere nobody chose.
	before := listing(t, nobodySide.home)
	if r := rootSide.run(t, "pool", "--pool", "pool.json", "acquire", "--owner", "root-ci", "--no-wait"); r.exit != 0 {
		t.Fatalf("root, beside nobody's plants: exit %d %s%s", r.exit, r.stdout, r.stderr)
	}
	if after := listing(t, nobodySide.home); after != before {
		t.Errorf("root wrote under nobody's home:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if out := listing(t, planted); strings.Count(out, "\n") != 2 { // the directory and the planted claim
		t.Errorf("root wrote in the directory nobody planted:\n%s", out)
	}
	conflictNamed(t, "nobody after root", nobodySide.run(t, "pool", "--pool", "pool.json", "acquire", "--owner", "nobody-ci", "--no-wait"), true, "root (uid 0)")
}

// pool-run takes the project's pool file, durable-lease-pool.json, when
// nothing names what to hold, and its commands run as the caller: one
// that another user put where it is looked for (here a sticky directory
// every user can write, as /tmp is, run from outside git) is refused,
// and nothing of it runs.
func TestPlantedPoolFileIsNotRun(t *testing.T) {
	needRoot(t)
	top := scratch(t)
	if err := os.Chmod(top, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(scratch(t), "ran")
	mustRun(t, asNobody, top, nil, "sh", "-c", `printf '%s' "$1" > durable-lease-pool.json`, "sh",
		`{"store": "s", "slots": [{"id": 1}], "provision": "touch `+marker+`"}`)
	r := run(t, nil, top, 0o022, []string{"HOME=" + scratch(t)}, "pool-run", "--", "true")
	if r.exit != 2 || !strings.Contains(r.stderr, "belongs to uid 65534 (you are uid 0): its commands would run as you") {
		t.Errorf("root's pool-run beside nobody's pool file: exit %d, want 2 naming the owner\n%s", r.exit, r.stderr)
	}
	// A link of nobody's at the name, to a file of root's, is refused too.
	own := filepath.Join(scratch(t), "pool.json")
	if err := os.WriteFile(own, []byte(`{"store": "s", "slots": [{"id": 1}], "provision": "touch `+marker+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, asNobody, top, nil, "rm", "durable-lease-pool.json")
	mustRun(t, asNobody, top, nil, "ln", "-s", own, "durable-lease-pool.json")
	if r := run(t, nil, top, 0o022, []string{"HOME=" + scratch(t)}, "pool-run", "--", "true"); r.exit != 2 || !strings.Contains(r.stderr, "belongs to uid 65534") {
		t.Errorf("root's pool-run beside nobody's link: exit %d, want 2\n%s", r.exit, r.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the planted pool file's provision ran")
	}
}
