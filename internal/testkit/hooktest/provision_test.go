package hooktest

import (
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// grant is the part of `pool acquire`'s output the tests use.
type grant struct {
	OK    bool              `json:"ok"`
	Code  string            `json:"code"`
	Slot  json.RawMessage   `json:"slot"`
	Token string            `json:"token"`
	Owner string            `json:"owner"`
	Env   map[string]string `json:"env"`
}

func (g grant) slot() string { return strings.Trim(string(g.Slot), `"`) }

// poolDir is a directory holding a copy of the example pool file (or the
// given one) and provisioner, and an environment with its own lease store
// and the test servers.
func poolDir(t *testing.T, svc services, poolJSON string) (file string, env []string) {
	t.Helper()
	dir := t.TempDir()
	file = filepath.Join(dir, "pool.json")
	if poolJSON == "" {
		copyExample(t, "pool.json", file, 0o644)
	} else {
		writeFile(t, file, poolJSON, 0o644)
	}
	copyExample(t, "provision.sh", filepath.Join(dir, "provision.sh"), 0o644)
	return file, isolatedEnv(t, dir, svc.env()...)
}

// acquire takes a slot now (no waiting) and returns the grant, whatever
// the outcome, with the command's result.
func acquire(t *testing.T, env []string, poolFile, owner string) (grant, result) {
	t.Helper()
	r := runIn(t, "", env, "pool", "--pool", poolFile, "acquire", "--owner", owner, "--no-wait")
	var g grant
	if err := json.Unmarshal([]byte(r.stdout), &g); err != nil {
		t.Fatalf("pool acquire printed no JSON object: %v\nstdout: %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return g, r
}

// acquireAll takes every slot of the pool and checks each grant against
// the example pool file.
func acquireAll(t *testing.T, env []string, poolFile string, p examplePool, round string) []grant {
	t.Helper()
	var out []grant
	seen := map[string]bool{}
	for i := range p.Slots {
		g, r := acquire(t, env, poolFile, fmt.Sprintf("%s-%d", round, i))
		if r.err != nil || !g.OK {
			t.Fatalf("%s: acquire %d: %v (code %s)\n%s", round, i, r.err, g.Code, r.stderr)
		}
		if seen[g.slot()] {
			t.Fatalf("%s: slot %s granted twice", round, g.slot())
		}
		seen[g.slot()] = true
		out = append(out, g)
	}
	for _, s := range p.Slots {
		if !seen[strconv.Itoa(s.ID)] {
			t.Fatalf("%s: slot %d never granted (got %v)", round, s.ID, seen)
		}
	}
	return out
}

func releaseAll(t *testing.T, env []string, poolFile string, grants []grant) {
	t.Helper()
	for _, g := range grants {
		must(t, "", env, "pool", "--pool", poolFile, "release", "--slot", g.slot(), "--owner", g.Owner, "--token", g.Token)
	}
}

// TestProvisionerCleansSlotOnEveryGrant: whatever one grant of a slot
// wrote, a table in its database and a key in its Redis index, is gone at
// the next grant of that slot, while a database and a Redis index outside
// the pool are left alone.
func TestProvisionerCleansSlotOnEveryGrant(t *testing.T) {
	svc := needServices(t)
	p := loadExamplePool(t)
	poolFile, env := poolDir(t, svc, "")

	const bystanderDB, bystanderKey = "hooktest_bystander", "hooktest:bystander"
	if _, err := svc.psql(t, "postgres", "DROP DATABASE IF EXISTS "+bystanderDB); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.psql(t, "postgres", "CREATE DATABASE "+bystanderDB); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = svc.psql(t, "postgres", "DROP DATABASE IF EXISTS "+bystanderDB)
		_, _ = svc.redis(t, "-n", "0", "DEL", bystanderKey)
	})
	if _, err := svc.psql(t, bystanderDB, "CREATE TABLE keep (x int); INSERT INTO keep VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if out, err := svc.redis(t, "-n", "0", "SET", bystanderKey, "keep"); err != nil || out != "OK" {
		t.Fatalf("SET in index 0: %v %s", err, out)
	}

	first := acquireAll(t, env, poolFile, p, "first")
	for _, g := range first {
		db, index := g.Env["POOL_SLOT_DB"], g.Env["POOL_SLOT_CACHEDB"]
		if _, err := svc.psql(t, db, "CREATE TABLE leftover (id int); INSERT INTO leftover VALUES (1)"); err != nil {
			t.Fatalf("slot %s: writing to its database %s: %v", g.slot(), db, err)
		}
		if out, err := svc.redis(t, "-n", index, "SET", "leftover", g.slot()); err != nil || out != "OK" {
			t.Fatalf("slot %s: writing to its Redis index %s: %v %s", g.slot(), index, err, out)
		}
	}
	releaseAll(t, env, poolFile, first)

	second := acquireAll(t, env, poolFile, p, "second")
	for _, g := range second {
		db, index := g.Env["POOL_SLOT_DB"], g.Env["POOL_SLOT_CACHEDB"]
		out, err := svc.psql(t, db, "SELECT to_regclass('leftover') IS NULL")
		if err != nil {
			t.Fatalf("slot %s: database %s is not there after the grant: %v", g.slot(), db, err)
		}
		if out != "t" {
			t.Errorf("slot %s: table leftover survived into the next grant of database %s", g.slot(), db)
		}
		if out, err := svc.redis(t, "-n", index, "DBSIZE"); err != nil || out != "0" {
			t.Errorf("slot %s: Redis index %s holds %q keys at the next grant (%v)", g.slot(), index, out, err)
		}
	}
	releaseAll(t, env, poolFile, second)

	if out, err := svc.psql(t, bystanderDB, "SELECT x FROM keep"); err != nil || out != "42" {
		t.Errorf("the database outside the pool was touched: %q %v", out, err)
	}
	if out, err := svc.redis(t, "-n", "0", "GET", bystanderKey); err != nil || out != "keep" {
		t.Errorf("Redis index 0, outside the pool, was touched: %q %v", out, err)
	}
}

// TestProvisionerRefusesUnsafeNames: a slot value that does not match the
// provisioner's patterns fails the grant before anything is dropped or
// flushed.
func TestProvisionerRefusesUnsafeNames(t *testing.T) {
	svc := needServices(t)
	const victimDB, victimKey = "hooktest_victim", "hooktest:victim"
	for _, sql := range []string{"DROP DATABASE IF EXISTS " + victimDB, "CREATE DATABASE " + victimDB} {
		if _, err := svc.psql(t, "postgres", sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = svc.psql(t, "postgres", "DROP DATABASE IF EXISTS "+victimDB)
		_, _ = svc.redis(t, "-n", "0", "DEL", victimKey)
	})
	if _, err := svc.psql(t, victimDB, "CREATE TABLE keep (x int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.redis(t, "-n", "0", "SET", victimKey, "keep"); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, slot, want string
	}{
		{"database without _test_N", `"db": "hooktest_victim", "cacheDb": 1`, "must look like name_test_N"},
		{"the maintenance database", `"db": "postgres", "cacheDb": 1`, "must look like name_test_N"},
		{"SQL in the name", `"db": "app_test_1\"; DROP DATABASE hooktest_victim; --", "cacheDb": 1`, "may only hold"},
		{"upper case", `"db": "App_test_1", "cacheDb": 1`, "must look like name_test_N"},
		{"no number at the end", `"db": "app_test_1x", "cacheDb": 1`, "must end in _test_ and a number"},
		{"too long", `"db": "a` + strings.Repeat("b", 60) + `_test_1", "cacheDb": 1`, "longer than 63"},
		{"Redis index 0", `"db": "app_test_1", "cacheDb": 0`, "Redis index '0'"},
		{"Redis index 100", `"db": "app_test_1", "cacheDb": 100`, "Redis index '100'"},
		{"Redis index with a space", `"db": "app_test_1", "cacheDb": "1 2"`, "Redis index '1 2'"},
		{"privileged port", `"db": "app_test_1", "cacheDb": 1, "ports": {"api": 80, "web": 41011}`, "port '80'"},
		{"port with a command", `"db": "app_test_1", "cacheDb": 1, "ports": {"api": "41010;true", "web": 41011}`, "port '41010;true'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			poolFile, env := poolDir(t, svc, `{"name": "unsafe", "provision": ". ./provision.sh --provision", "health": ". ./provision.sh --health", "slots": [{"id": 1, `+tc.slot+`}]}`)
			g, r := acquire(t, env, poolFile, "unsafe")
			if r.err == nil || g.OK {
				t.Fatalf("the grant succeeded; stderr:\n%s", r.stderr)
			}
			if code := r.exitCode(); code != 1 || g.Code != "reset_failed" {
				t.Errorf("exit %d code %q, want 1 reset_failed", code, g.Code)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr does not say %q:\n%s", tc.want, r.stderr)
			}
		})
	}
	if out, err := svc.psql(t, victimDB, "SELECT to_regclass('keep') IS NOT NULL"); err != nil || out != "t" {
		t.Errorf("database %s was dropped or emptied: %q %v", victimDB, out, err)
	}
	if out, err := svc.redis(t, "-n", "0", "GET", victimKey); err != nil || out != "keep" {
		t.Errorf("Redis index 0 was flushed: %q %v", out, err)
	}
}

// TestProvisionerFailsWhenServerUnreachable: with PostgreSQL or Redis out
// of reach the grant fails, saying which, and the slot is free again.
func TestProvisionerFailsWhenServerUnreachable(t *testing.T) {
	svc := needServices(t)
	closed := closedPort(t)
	cases := []struct {
		name, override, want string
	}{
		{"PostgreSQL", "PGPORT=" + closed, "could not drop and create database app_test_"},
		{"Redis", "REDIS_PORT=" + closed, "could not flush index"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			poolFile, env := poolDir(t, svc, "")
			g, r := acquire(t, append(env, tc.override), poolFile, "unreachable")
			if r.err == nil || g.OK {
				t.Fatalf("the grant succeeded with %s; stderr:\n%s", tc.override, r.stderr)
			}
			if g.Code != "reset_failed" {
				t.Errorf("code %q, want reset_failed", g.Code)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr does not say %q:\n%s", tc.want, r.stderr)
			}
			assertPoolFree(t, env, poolFile, "")
		})
	}
}

// closedPort is a loopback TCP port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	return port
}

// poolStatus is the part of `pool status` the tests check.
type poolStatus struct {
	OK    bool `json:"ok"`
	Slots []struct {
		Slot   json.RawMessage `json:"slot_id"`
		Kind   string          `json:"kind"`
		State  string          `json:"state"`
		Holder *string         `json:"holder"`
	} `json:"slots"`
	Queue []json.RawMessage `json:"queue"`
	Dir   string            `json:"poolDir"`
}

// assertPoolFree checks, with `pool status` and `lease status` on each
// slot's lease, that no slot is held and nobody waits.
func assertPoolFree(t *testing.T, env []string, poolFile, dir string) {
	t.Helper()
	var st poolStatus
	out := must(t, dir, env, "pool", "--pool", poolFile, "status")
	if err := json.Unmarshal([]byte(out), &st); err != nil || !st.OK {
		t.Fatalf("pool status: %v\n%s", err, out)
	}
	if len(st.Queue) != 0 {
		t.Errorf("pool status: %d waiters left in the queue: %s", len(st.Queue), out)
	}
	for _, s := range st.Slots {
		if s.State != "free" {
			holder := ""
			if s.Holder != nil {
				holder = *s.Holder
			}
			t.Errorf("pool status: slot %s is %s (holder %q), want free", s.Slot, s.State, holder)
		}
		var ls struct {
			OK    bool   `json:"ok"`
			State string `json:"state"`
		}
		out := must(t, dir, env, "lease", "--store", st.Dir, "status", "--kind", s.Kind)
		if err := json.Unmarshal([]byte(out), &ls); err != nil || !ls.OK || ls.State != "free" {
			t.Errorf("lease status --kind %s: %v %s, want state free", s.Kind, err, out)
		}
	}
}
