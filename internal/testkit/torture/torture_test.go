package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain turns the test binary into a client when DL_TORTURE_ROLE is set.
func TestMain(m *testing.M) {
	RunClientFromEnv()
	testrun.Main(m)
}

func seed(t *testing.T) uint64 {
	if s := os.Getenv("TORTURE_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TORTURE_SEED: %v", err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

func runProfile(t *testing.T, pr Profile) *Report {
	t.Helper()
	if pr.Dir == "" {
		pr.Dir = t.TempDir()
	}
	if keep := os.Getenv("TORTURE_KEEP"); keep != "" {
		pr.Dir = filepath.Join(keep, fmt.Sprintf("%s-%d", pr.Mode, pr.Seed))
		_ = os.MkdirAll(pr.Dir, 0o755)
	}
	pr.Binary = os.Args[0]
	t.Logf("%s profile: %d lanes x %d ops, segments of %d, seed %d, dir %s",
		pr.Mode, pr.Lanes, pr.OpsPerLane, pr.Segment, pr.Seed, pr.Dir)
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	defer cancel()
	res, err := Run(ctx, pr)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Check(pr.Dir, res)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	_ = os.WriteFile(filepath.Join(pr.Dir, "report.json"), b, 0o644)
	t.Logf("report:\n%s", b)
	for _, v := range rep.Violations {
		t.Errorf("violation: %s", v)
	}
	if len(rep.Violations) > 0 {
		t.Logf("journals kept in %s", pr.Dir)
	}
	return rep
}

// TestTortureShort is the profile .ci/run runs (through go test ./...).
func TestTortureShort(t *testing.T) {
	if testing.Short() {
		testrun.Skip(t, "-short")
	}
	s := seed(t)
	t.Logf("TORTURE_SEED=%d reproduces every profile's schedule of kills", s)
	// The two profiles run side by side, each on its own store.
	t.Run("lease", func(t *testing.T) {
		t.Parallel()
		runProfile(t, Profile{Mode: "lease", Lanes: 8, OpsPerLane: 300, Segment: 30, TTLMinutes: 0.01,
			KillRate: 0.1, Seed: s, MaxGap: 10 * time.Second, StrictGuard: true})
	})
	// The pool profile's 8 lanes x 120 ops run as two halves side by
	// side, each on a store of its own: a pool's grants are paced by its
	// provisions and waits, not by the host.
	for i, half := range []string{"pool", "pool-b"} {
		t.Run(half, func(t *testing.T) {
			t.Parallel()
			runProfile(t, Profile{Mode: "pool", Lanes: 8, OpsPerLane: 60, Segment: 20, Slots: 2, TTLMinutes: 0.01,
				KillRate: 0.1, Seed: s + 1 + uint64(i)*4, MaxGap: 10 * time.Second, StrictGuard: true})
		})
	}
}

// TestTortureLong is the opt-in long profile: TORTURE=long. TORTURE_LANES,
// TORTURE_OPS and TORTURE_SEGMENT scale it.
func TestTortureLong(t *testing.T) {
	if os.Getenv("TORTURE") != "long" {
		testrun.Skip(t, "the long torture profile: set TORTURE=long")
	}
	env := func(name string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
			return v
		}
		return def
	}
	lanes, ops, seg := env("TORTURE_LANES", 32), env("TORTURE_OPS", 10000), env("TORTURE_SEGMENT", 250)
	poolOps, poolSeg := env("TORTURE_POOL_OPS", ops), env("TORTURE_POOL_SEGMENT", seg)
	s := seed(t)
	t.Logf("TORTURE_SEED=%d reproduces every profile's schedule of kills", s)
	t.Run("lease", func(t *testing.T) {
		runProfile(t, Profile{Mode: "lease", Lanes: lanes, OpsPerLane: ops, Segment: seg, TTLMinutes: 0.01,
			KillRate: 0.1, Seed: s, MaxGap: 10 * time.Second})
	})
	t.Run("pool", func(t *testing.T) {
		runProfile(t, Profile{Mode: "pool", Lanes: lanes, OpsPerLane: poolOps, Segment: poolSeg, Slots: 4, TTLMinutes: 0.05,
			KillRate: 0.1, Seed: s + 1, MaxGap: 10 * time.Second})
	})
	// A herd: TORTURE_HERD (default 200) blocked waiters on one kind and on
	// a one-slot pool, a tenth of them killed, some while they wait, some
	// while they hold.
	herd, herdOps := env("TORTURE_HERD", 200), env("TORTURE_HERD_OPS", 12)
	t.Run("lease-herd", func(t *testing.T) {
		runProfile(t, Profile{Mode: "lease", Lanes: herd, OpsPerLane: herdOps, Segment: 4, TTLMinutes: 0.01,
			KillRate: 0.1, Seed: s + 2, MaxGap: 10 * time.Second, Wait: time.Minute})
	})
	t.Run("pool-herd", func(t *testing.T) {
		runProfile(t, Profile{Mode: "pool", Lanes: herd, OpsPerLane: herdOps, Segment: 4, Slots: 1, TTLMinutes: 0.05,
			KillRate: 0.1, Seed: s + 3, MaxGap: 10 * time.Second, Wait: time.Minute, Provision: ":"})
	})
}

// TestRecheck replays the checker over a run kept with TORTURE_KEEP:
// TORTURE_RECHECK=<dir> go test -run TestRecheck ./internal/testkit/torture/
func TestRecheck(t *testing.T) {
	dir := os.Getenv("TORTURE_RECHECK")
	if dir == "" {
		testrun.Skip(t, "a replay of a kept run: set TORTURE_RECHECK to its directory")
	}
	data, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(dir, &res)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	t.Logf("report:\n%s", b)
	for _, v := range rep.Violations {
		t.Errorf("violation: %s", v)
	}
}

// The checker must see what it is there to see: synthetic journals with
// one planted violation each.
func TestCheckerCatches(t *testing.T) {
	const ttl = 600
	base := int64(1_800_000_000_000) // ms
	ns := func(msv int64) int64 { return msv * 1e6 }
	acq := func(c, tok string, at int64) []Entry {
		return []Entry{
			{Client: c, Phase: "begin", Op: "acquire", Kind: "baton", TB: ns(at)},
			{Client: c, Phase: "end", Op: "acquire", Kind: "baton", Out: "won", Tok: tok, Stamp: at, TTLms: ttl, TB: ns(at), TA: ns(at) + 500_000},
		}
	}
	rel := func(c, tok string, at int64) []Entry {
		return []Entry{
			{Client: c, Phase: "begin", Op: "release", Kind: "baton", Tok: tok, TB: ns(at)},
			{Client: c, Phase: "end", Op: "release", Kind: "baton", Tok: tok, Out: "ok", TB: ns(at), TA: ns(at) + 500_000},
		}
	}
	beat := func(c, tok string, at int64) []Entry {
		return []Entry{
			{Client: c, Phase: "begin", Op: "heartbeat", Kind: "baton", Tok: tok, TB: ns(at)},
			{Client: c, Phase: "end", Op: "heartbeat", Kind: "baton", Tok: tok, Out: "ok", Stamp: at, TTLms: ttl, TB: ns(at), TA: ns(at) + 500_000},
		}
	}
	cat := func(parts ...[]Entry) []Entry {
		var out []Entry
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	cases := []struct {
		name    string
		clients map[string][]Entry
		res     map[string]string
		want    string // substring of a violation; "" for none
	}{
		{"clean hand-off", map[string][]Entry{
			"a": cat(acq("a", "t1", base), rel("a", "t1", base+10)),
			"b": cat(acq("b", "t2", base+11), rel("b", "t2", base+20)),
		}, nil, ""},
		{"two holders", map[string][]Entry{
			"a": cat(acq("a", "t1", base), rel("a", "t1", base+100)),
			"b": cat(acq("b", "t2", base+50), rel("b", "t2", base+120)),
		}, nil, "two holders of baton"},
		{"acquired after expiry is fine", map[string][]Entry{
			"a": cat(acq("a", "t1", base), rel("a", "t1", base+ttl+100)),
			"b": cat(acq("b", "t2", base+ttl+1), rel("b", "t2", base+ttl+50)),
		}, nil, ""},
		{"heartbeat keeps it", map[string][]Entry{
			"a": cat(acq("a", "t1", base), beat("a", "t1", base+500), rel("a", "t1", base+ttl+400)),
			"b": cat(acq("b", "t2", base+ttl+1), rel("b", "t2", base+ttl+450)),
		}, nil, "two holders of baton"},
		{"heartbeat after expiry", map[string][]Entry{
			"a": cat(acq("a", "t1", base), beat("a", "t1", base+ttl+5), rel("a", "t1", base+ttl+10)),
		}, nil, "heartbeat after expiry"},
		{"resource interleaving", map[string][]Entry{
			"a": cat(acq("a", "t1", base), rel("a", "t1", base+100)),
			"b": cat(acq("b", "t2", base+50), rel("b", "t2", base+120)),
		}, map[string]string{"baton.res": fmt.Sprintf("enter a t1 %d\nenter b t2 %d\nexit a t1 %d\nexit b t2 %d\n", ns(base+1), ns(base+51), ns(base+60), ns(base+70))},
			"two holders in the critical section"},
		{"unjournaled takeover", map[string][]Entry{
			"a": acq("a", "t1", base),
			"b": {{Client: "b", Phase: "end", Op: "acquire", Kind: "baton", Out: "tookover", Tok: "t2", PrevTok: "t1", Stamp: base + ttl + 5, TTLms: ttl, TB: ns(base + ttl + 5), TA: ns(base+ttl+5) + 1}},
		}, nil, "takeover not journaled"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{"journals", "store", "res"} {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			names := make([]string, 0, len(c.clients))
			for n := range c.clients {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				var b strings.Builder
				for i, e := range c.clients[n] {
					e.Seq = i + 1
					line, _ := json.Marshal(e)
					b.Write(append(line, '\n'))
				}
				if err := os.WriteFile(filepath.Join(dir, "journals", n+".jsonl"), []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for n, body := range c.res {
				if err := os.WriteFile(filepath.Join(dir, "res", n), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := Check(dir, &Result{Profile: Profile{Mode: "lease"}})
			if err != nil {
				t.Fatal(err)
			}
			var hit []string
			for _, v := range rep.Violations {
				if c.want != "" && strings.Contains(v, c.want) {
					hit = append(hit, v)
				}
			}
			switch {
			case c.want == "" && len(rep.Violations) > 0:
				t.Errorf("false positives: %q", rep.Violations)
			case c.want != "" && len(hit) == 0:
				t.Errorf("missed %q; got %q", c.want, rep.Violations)
			}
		})
	}
}
