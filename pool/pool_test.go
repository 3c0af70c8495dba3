package pool_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/internal/testkit/storetest"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
	"github.com/durable-lease/durable-lease/provision"
)

var errBoom = errors.New("boom")

// errBadOwner stands for an owner refused by the owner fence: the pool
// defers to the store's fence, so either package's ErrInvalid may report it.
var errBadOwner = errors.New("pool.ErrInvalid or lease.ErrInvalid")

func TestAcquireGrantsFreeSlot(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, twoSlotPool, pool.Options{})
	g := tp.mustAcquire(t, "ci-main")

	wantCalls := []call{{provision.ActionProvision, "1", "prov --slot"}, {provision.ActionHealth, "1", "check --slot"}}
	if got := tp.runner.Calls(); !reflect.DeepEqual(got, wantCalls) {
		t.Errorf("runner calls = %+v, want %+v", got, wantCalls)
	}
	st, err := tp.Store().Status(context.Background(), "slot-1")
	if err != nil || st.State != lease.Held {
		t.Fatalf("slot-1 status = %+v, %v", st, err)
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"Slot is the raw id", g.Slot, json.Number("1")},
		{"Kind", g.Kind, "slot-1"},
		{"Owner", g.Owner, "ci-main"},
		{"Token is the lease's", g.Token, st.Record.Token},
		{"Mode", g.Mode, pool.ModeBlocking},
		{"TTLMinutes", g.TTLMinutes, 30.0},
		{"Env", g.Env, map[string]string{"APP_PORT": "3000", "DB": "acme_test_1"}},
		{"Attributes", g.Attributes, map[string]any{"ports": map[string]any{"api": json.Number("3000"), "web": json.Number("3001")}, "db": "acme_test_1"}},
		{"Fields", len(g.Fields), 0},
		{"GrantedAt", g.GrantedAt, lease.FormatTime(t0)},
		{"request id is valid", pool.CheckRequestID(g.RequestID), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Errorf("got %#v, want %#v", tc.got, tc.want)
			}
		})
	}

	t.Run("lease payload names the request", func(t *testing.T) {
		var pl map[string]any
		if err := json.Unmarshal(st.Record.Payload, &pl); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"requestId": g.RequestID, "session": "ci-main", "mode": pool.ModeBlocking}
		if !reflect.DeepEqual(pl, want) {
			t.Errorf("payload = %v, want %v", pl, want)
		}
	})

	t.Run("grant file", func(t *testing.T) {
		path := filepath.Join(tp.store, "pool", "grants", g.RequestID+".json")
		var f map[string]any
		readJSONFile(t, path, &f)
		for k, want := range map[string]any{
			"ok": true, "state": "ready", "requestId": g.RequestID, "request_id": g.RequestID,
			"slot": 1.0, "slot_id": 1.0, "kind": "slot-1", "owner": "ci-main", "token": g.Token,
			"mode": "blocking", "ttlMinutes": 30.0, "grantedAt": g.GrantedAt,
		} {
			if !reflect.DeepEqual(f[k], want) {
				t.Errorf("%s = %#v, want %#v", k, f[k], want)
			}
		}
		if !reflect.DeepEqual(f["attributes"], f["attrs"]) || f["attrs"] == nil {
			t.Errorf("attributes %v / attrs %v", f["attributes"], f["attrs"])
		}
		if env, _ := f["env"].(map[string]any); env["APP_PORT"] != "3000" {
			t.Errorf("env = %v", f["env"])
		}
		data, _ := os.ReadFile(path)
		if !strings.HasPrefix(string(data), "{\n  \"ok\": true,\n  \"state\": \"ready\",") || !strings.HasSuffix(string(data), "}\n") {
			t.Errorf("grant file is not two-space indented with ok and state first:\n%s", data)
		}
	})

	t.Run("journal and queue", func(t *testing.T) {
		granted := eventsNamed(logEvents(t, tp.Dir()), "granted")
		if len(granted) != 1 || granted[0]["request_id"] != g.RequestID || granted[0]["slot_id"] != 1.0 || granted[0]["owner"] != "ci-main" {
			t.Errorf("granted events = %v", granted)
		}
		if q := readQueue(tp.Pool); len(q) != 0 {
			t.Errorf("queue = %+v, want empty", q)
		}
	})

	t.Run("second grant takes the next slot", func(t *testing.T) {
		tp.runner.Reset()
		g2 := tp.mustAcquire(t, "agent-7")
		if g2.Slot != json.Number("2") || g2.Env["APP_PORT"] != "3100" || g2.Token == g.Token {
			t.Errorf("second grant = %+v", g2)
		}
		want := []call{{provision.ActionProvision, "2", "prov --slot"}, {provision.ActionHealth, "2", "check --slot"}}
		if got := tp.runner.Calls(); !reflect.DeepEqual(got, want) {
			t.Errorf("runner calls = %+v, want %+v", got, want)
		}
	})
}

func TestGrantFieldsAndJSON(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, `{
	  "grantFields": {"ports": "{ports}", "apiPort": "{ports.api}", "url": "http://localhost:{ports.api}/", "static": [1]},
	  "slots": [{"id": "a", "ports": {"api": 3000}}]
	}`, pool.Options{})
	g := tp.mustAcquire(t, "ci-main")
	if g.Slot != "a" {
		t.Errorf("Slot = %#v, want the string id", g.Slot)
	}
	if env := g.Env; env["POOL_SLOT_ID"] != "a" || env["POOL_SLOT_PORTS_API"] != "3000" || env["POOL_SLOT_KIND"] != "slot-a" {
		t.Errorf("default env = %v", env)
	} else if _, ok := env["POOL_ACTION"]; ok {
		t.Errorf("default env carries POOL_ACTION: %v", env)
	}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `{"ok":true,"state":"ready",`) {
		t.Errorf("grant JSON does not start with ok and state: %s", b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"ports": map[string]any{"api": 3000.0}, "apiPort": 3000.0, "url": "http://localhost:3000/",
		"static": []any{1.0}, "slot": "a", "slot_id": "a",
	} {
		if !reflect.DeepEqual(m[k], want) {
			t.Errorf("%s = %#v, want %#v", k, m[k], want)
		}
	}
	var onDisk map[string]any
	readJSONFile(t, grantPath(tp.Pool, g.RequestID), &onDisk)
	if !reflect.DeepEqual(onDisk, m) {
		t.Errorf("grant file %v differs from the grant %v", onDisk, m)
	}
}

func TestAcquireNoWaitSaturated(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	tp.mustAcquire(t, "holder")
	tp.runner.Reset()

	t.Run("alone", func(t *testing.T) {
		g, err := tp.Acquire(context.Background(), pool.AcquireRequest{Owner: "agent-7", NoWait: true})
		if g != nil || !errors.Is(err, pool.ErrSaturated) {
			t.Fatalf("Acquire = %v, %v; want ErrSaturated", g, err)
		}
		var qe *pool.QueueError
		if !errors.As(err, &qe) || qe.Position != 1 || qe.EtaMs != (8*time.Minute).Milliseconds() {
			t.Errorf("queue error = %+v, want position 1, eta 8m", qe)
		}
		if !strings.Contains(err.Error(), "queue position 1, eta ~8m") {
			t.Errorf("message %q", err)
		}
		if q := readQueue(tp.Pool); len(q) != 0 {
			t.Errorf("queue = %+v, want empty", q)
		}
		if calls := tp.runner.Calls(); len(calls) != 0 {
			t.Errorf("runner ran %+v", calls)
		}
	})
	t.Run("behind an async request", func(t *testing.T) {
		q, err := tp.Request(context.Background(), "agent-1", "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = tp.Acquire(context.Background(), pool.AcquireRequest{Owner: "agent-7", NoWait: true})
		var qe *pool.QueueError
		if !errors.As(err, &qe) || !errors.Is(err, pool.ErrSaturated) || qe.Position != 2 || qe.EtaMs != 2*(8*time.Minute).Milliseconds() {
			t.Errorf("err = %v (%+v), want saturated at position 2", err, qe)
		}
		if entries := readQueue(tp.Pool); len(entries) != 1 || entries[0].ID != q.RequestID {
			t.Errorf("queue = %+v, want only the async request", entries)
		}
	})
	t.Run("a free slot behind a waiter is not taken", func(t *testing.T) {
		// The async request is ahead; FIFO says the free slot is its.
		st, _ := tp.Store().Status(context.Background(), "slot-1")
		if _, err := tp.Release(context.Background(), "1", "holder", st.Record.Token, false); err != nil {
			t.Fatal(err)
		}
		_, err := tp.Acquire(context.Background(), pool.AcquireRequest{Owner: "agent-7", NoWait: true})
		if !errors.Is(err, pool.ErrSaturated) {
			t.Errorf("err = %v, want ErrSaturated (the slot belongs to the queued request)", err)
		}
		if tp.slotState(t, "1") != lease.Free {
			t.Error("the slot was taken")
		}
	})
}

func TestAcquireCommandFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		failOn    provision.Action
		sentinel  error
		state     string
		event     string
		wantCalls []provision.Action
	}{
		{"provision fails", provision.ActionProvision, pool.ErrProvisionFailed, pool.GrantResetFailed, "grant_reset_failed", []provision.Action{provision.ActionProvision}},
		{"health fails", provision.ActionHealth, pool.ErrHealthFailed, pool.GrantHealthFailed, "grant_health_failed", []provision.Action{provision.ActionProvision, provision.ActionHealth}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestPool(t, oneSlotPool, pool.Options{})
			tp.runner.SetFail(func(_ context.Context, c call) error {
				if c.Action == tc.failOn {
					return &provision.ExitError{Status: 3}
				}
				return nil
			})
			g, err := tp.Acquire(context.Background(), pool.AcquireRequest{Owner: "ci-main", NoWait: true})
			if g != nil || !errors.Is(err, tc.sentinel) {
				t.Fatalf("Acquire = %v, %v; want %v", g, err, tc.sentinel)
			}
			var se *pool.SlotError
			if !errors.As(err, &se) || se.State != tc.state || se.Slot.ID != "1" {
				t.Errorf("slot error = %+v", se)
			}
			if !strings.Contains(err.Error(), "exit status 3") {
				t.Errorf("message %q does not carry the exit status", err)
			}
			var actions []provision.Action
			for _, c := range tp.runner.Calls() {
				actions = append(actions, c.Action)
			}
			if !reflect.DeepEqual(actions, tc.wantCalls) {
				t.Errorf("calls = %v, want %v", actions, tc.wantCalls)
			}
			if s := tp.slotState(t, "1"); s != lease.Free {
				t.Errorf("slot state = %s, want free (released)", s)
			}
			files := grantFiles(t, tp.Dir())
			if len(files) != 1 {
				t.Fatalf("grant files = %v", files)
			}
			var f map[string]any
			readJSONFile(t, files[0], &f)
			id := strings.TrimSuffix(filepath.Base(files[0]), ".json")
			for k, want := range map[string]any{"ok": false, "state": tc.state, "requestId": id, "request_id": id, "slot": 1.0, "slot_id": 1.0, "at": lease.FormatTime(t0)} {
				if !reflect.DeepEqual(f[k], want) {
					t.Errorf("grant file %s = %#v, want %#v", k, f[k], want)
				}
			}
			if e, _ := f["error"].(string); !strings.Contains(e, "exit status 3") {
				t.Errorf("grant file error = %q", e)
			}
			if ev := eventsNamed(logEvents(t, tp.Dir()), tc.event); len(ev) != 1 || ev[0]["request_id"] != id {
				t.Errorf("%s events = %v", tc.event, ev)
			}
			if q := readQueue(tp.Pool); len(q) != 0 {
				t.Errorf("queue = %+v, want empty", q)
			}
			// The slot is usable again.
			tp.runner.SetFail(nil)
			tp.mustAcquire(t, "ci-main")
		})
	}
}

func TestAcquireLeaseLostDuringProvision(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ttl  float64
		// during runs inside the provision command.
		during func(ctx context.Context, tp *testPool) error
	}{
		{"provision outlives the ttl", 0, func(_ context.Context, tp *testPool) error {
			tp.clock.Advance(31 * time.Minute)
			return nil
		}},
		{"taken over during provision", 0, func(_ context.Context, tp *testPool) error {
			tp.clock.Advance(31 * time.Minute)
			_, err := tp.Store().Acquire(context.Background(), lease.Request{Kind: "slot-1", Owner: "intruder", TTLMinutes: 30})
			return err
		}},
		{"heartbeat finds the lease lost and cancels the command", lease.MinTTLMinutes, func(ctx context.Context, tp *testPool) error {
			tp.clock.Advance(time.Minute) // the 30 ms ttl passes on the lease's clock
			select {
			case <-ctx.Done(): // the heartbeat loop (every ttl/4 = 7.5 ms) cancels us
				return ctx.Err()
			case <-time.After(10 * time.Second):
				return errors.New("the command was not cancelled")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tp *testPool
			fr := &fakeRunner{}
			tp = newTestPool(t, oneSlotPool, pool.Options{TTLMinutes: tc.ttl, ScriptRunner: fr.run})
			tp.runner = fr
			fr.SetFail(func(ctx context.Context, c call) error {
				if c.Action == provision.ActionProvision {
					return tc.during(ctx, tp)
				}
				return nil
			})
			g, err := tp.Acquire(context.Background(), pool.AcquireRequest{Owner: "ci-main", NoWait: true})
			if g != nil || !errors.Is(err, pool.ErrLeaseLost) {
				t.Fatalf("Acquire = %+v, %v; want ErrLeaseLost and no grant", g, err)
			}
			var se *pool.SlotError
			if !errors.As(err, &se) || se.State != pool.GrantLeaseLostReset {
				t.Errorf("slot error = %+v", se)
			}
			files := grantFiles(t, tp.Dir())
			if len(files) != 1 {
				t.Fatalf("grant files = %v", files)
			}
			var f map[string]any
			readJSONFile(t, files[0], &f)
			if f["state"] != pool.GrantLeaseLostReset || f["ok"] != false || f["token"] != nil {
				t.Errorf("grant file = %v", f)
			}
			if ev := eventsNamed(logEvents(t, tp.Dir()), "grant_lease_lost_during_reset"); len(ev) != 1 {
				t.Errorf("journal: %v", logEvents(t, tp.Dir()))
			}
			if ev := eventsNamed(logEvents(t, tp.Dir()), "granted"); len(ev) != 0 {
				t.Errorf("a grant was journaled: %v", ev)
			}
		})
	}
}

func TestAcquireWaitTimeout(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	tp.mustAcquire(t, "holder")
	// The deadline runs from before the request is queued, WaitedMs from
	// after: 600 ms leaves the queueing half a second on a loaded host
	// (with 150 ms, one took more than 50 ms in CI).
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	var positions []pool.Position
	var mu sync.Mutex
	g, err := tp.Acquire(ctx, pool.AcquireRequest{Owner: "agent-7", OnWait: func(p pool.Position) {
		mu.Lock()
		positions = append(positions, p)
		mu.Unlock()
	}})
	if g != nil || !errors.Is(err, pool.ErrTimeout) {
		t.Fatalf("Acquire = %v, %v; want ErrTimeout", g, err)
	}
	var qe *pool.QueueError
	if !errors.As(err, &qe) || qe.Position != 1 || qe.RequestID == "" || qe.WaitedMs < 100 {
		t.Errorf("queue error = %+v", qe)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(positions) != 1 || positions[0].Position != 1 || positions[0].EtaMs != (8*time.Minute).Milliseconds() {
		t.Errorf("OnWait saw %+v, want one call with position 1", positions)
	}
	if q := readQueue(tp.Pool); len(q) != 0 {
		t.Errorf("queue = %+v, want empty after the timeout", q)
	}
}

func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	ctx := context.Background()
	tests := []struct {
		name string
		err  error
		want error
	}{}
	add := func(name string, err, want error) {
		tests = append(tests, struct {
			name string
			err  error
			want error
		}{name, err, want})
	}
	_, err := tp.Acquire(ctx, pool.AcquireRequest{Owner: "bad owner"})
	add("acquire bad owner", err, errBadOwner)
	_, err = tp.Request(ctx, "", "")
	add("request empty owner", err, errBadOwner)
	_, err = tp.Claim(ctx, "../x", "agent-7")
	add("claim ../x", err, pool.ErrInvalid)
	_, err = tp.Claim(ctx, "", "agent-7")
	add("claim empty id", err, pool.ErrInvalid)
	_, err = tp.Claim(ctx, "a/b", "agent-7")
	add("claim a/b", err, pool.ErrInvalid)
	_, err = tp.Claim(ctx, strings.Repeat("a", 129), "agent-7")
	add("claim too long", err, pool.ErrInvalid)
	_, err = tp.Claim(ctx, "ok-id", "bad owner")
	add("claim bad owner", err, errBadOwner)
	_, err = tp.Claim(ctx, "0f1c8e4e-0000-4000-8000-000000000000", "agent-7")
	add("claim unknown", err, pool.ErrUnknownRequest)
	_, err = tp.Wait(ctx, "../x", "agent-7", 0)
	add("wait ../x", err, pool.ErrInvalid)
	_, err = tp.Wait(ctx, "not-queued", "agent-7", 0)
	add("wait not queued", err, pool.ErrQueueEntryLost)
	_, err = tp.Release(ctx, "9", "a", "t", false)
	add("release unknown slot", err, pool.ErrInvalid)
	_, err = tp.Release(ctx, "1", "", "", true)
	add("force release without owner or bookkeeper", err, pool.ErrInvalid)
	_, err = tp.Release(ctx, "1", "bad owner", "", true)
	add("force release by a bad owner", err, errBadOwner)
	_, err = tp.Reset(ctx, "9", "a", "t")
	add("reset unknown slot", err, pool.ErrInvalid)
	_, err = tp.Reprovision(ctx, "9", "a")
	add("reprovision unknown slot", err, pool.ErrInvalid)
	_, _, err = tp.Health(ctx, "9")
	add("health unknown slot", err, pool.ErrInvalid)
	_, err = tp.Pump(ctx, "bad owner")
	add("pump bad owner", err, errBadOwner)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok := errors.Is(tc.err, tc.want)
			if tc.want == errBadOwner {
				ok = errors.Is(tc.err, pool.ErrInvalid) || errors.Is(tc.err, lease.ErrInvalid)
			}
			if !ok {
				t.Errorf("err = %v, want %v", tc.err, tc.want)
			}
		})
	}
	if calls := tp.runner.Calls(); len(calls) != 0 {
		t.Errorf("runner ran %+v", calls)
	}
}

func TestReleaseStatsAndETA(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	ctx := context.Background()
	if got := tp.MovingAvg(context.Background()); got != 8*time.Minute {
		t.Errorf("MovingAvg without history = %v, want the 8m seed", got)
	}
	for i := 1; i <= 12; i++ {
		g := tp.mustAcquire(t, "ci-main")
		tp.clock.Advance(time.Duration(i) * time.Second)
		rel, err := tp.Release(ctx, "1", "ci-main", g.Token, false)
		if err != nil || !rel.Released || rel.WasExpired {
			t.Fatalf("Release #%d = %+v, %v", i, rel, err)
		}
	}
	var st struct {
		DurationsMs []float64 `json:"durationsMs"`
	}
	readJSONFile(t, filepath.Join(tp.Dir(), pool.StatsFile), &st)
	want := []float64{3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000, 11000, 12000}
	if !reflect.DeepEqual(st.DurationsMs, want) {
		t.Errorf("durationsMs = %v, want the last 10: %v", st.DurationsMs, want)
	}
	if got := tp.MovingAvg(context.Background()); got != 7500*time.Millisecond {
		t.Errorf("MovingAvg = %v, want 7.5s", got)
	}
	if ev := eventsNamed(logEvents(t, tp.Dir()), "released"); len(ev) != 12 {
		t.Errorf("released events = %d, want 12", len(ev))
	}

	t.Run("eta is position times the average", func(t *testing.T) {
		tp.mustAcquire(t, "ci-main") // hold the slot so the requests queue
		q1, err := tp.Request(ctx, "agent-1", "s1")
		if err != nil {
			t.Fatal(err)
		}
		q2, err := tp.Request(ctx, "agent-2", "s2")
		if err != nil {
			t.Fatal(err)
		}
		if q1.Position.Position != 1 || q1.EtaMs != 7500 || q2.Position.Position != 2 || q2.EtaMs != 15000 || q2.AvgMs != 7500 {
			t.Errorf("positions %+v %+v", q1.Position, q2.Position)
		}
		status, err := tp.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(status.Queue) != 2 || status.Queue[1].EtaMs != 15000 || status.MovingAvgMs != 7500 {
			t.Errorf("status = %+v", status)
		}
		if len(status.Slots) != 1 || status.Slots[0].State != lease.Held || status.Slots[0].Holder != "ci-main" {
			t.Errorf("status slots = %+v", status.Slots)
		}
		c, err := tp.Claim(ctx, q2.RequestID, "agent-2")
		if err != nil || c.Queued == nil || c.Queued.Position.Position != 2 || c.Queued.EtaMs != 15000 {
			t.Errorf("Claim = %+v, %v", c, err)
		}
	})
}

func TestReleaseRefusals(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, `{"bookkeeper": "broker", "slots": [{"id": 1}]}`, pool.Options{})
	ctx := context.Background()
	g := tp.mustAcquire(t, "ci-main")
	if _, err := tp.Release(ctx, "1", "ci-main", "wrong", false); !errors.Is(err, lease.ErrNotOwner) {
		t.Errorf("wrong token: %v", err)
	}
	if _, err := tp.Release(ctx, "1", "other", g.Token, false); !errors.Is(err, lease.ErrNotOwner) {
		t.Errorf("wrong owner: %v", err)
	}
	if tp.slotState(t, "1") != lease.Held {
		t.Fatal("a refused release freed the slot")
	}
	rel, err := tp.Release(ctx, "1", "", "", true)
	if err != nil || !rel.Released {
		t.Fatalf("force release with the bookkeeper = %+v, %v", rel, err)
	}
	rel, err = tp.Release(ctx, "1", "ci-main", g.Token, false)
	if err != nil || rel.Released {
		t.Errorf("release of a free slot = %+v, %v; want nothing released", rel, err)
	}
}

func TestBadBookkeeperIsRefusedAtUse(t *testing.T) {
	t.Parallel()
	// The pool file accepts any bookkeeper string; the store's owner fence
	// refuses it when release --force uses it.
	tp := newTestPool(t, `{"bookkeeper": "no spaces", "slots": [{"id": 1}]}`, pool.Options{})
	tp.mustAcquire(t, "ci-main")
	_, err := tp.Release(context.Background(), "1", "", "", true)
	if !errors.Is(err, pool.ErrInvalid) && !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("force release with an invalid bookkeeper = %v", err)
	}
	if tp.slotState(t, "1") != lease.Held {
		t.Error("the slot was released")
	}
}

func TestReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("held slot runs reset then health", func(t *testing.T) {
		tp := newTestPool(t, oneSlotPool, pool.Options{})
		g := tp.mustAcquire(t, "ci-main")
		tp.runner.Reset()
		s, err := tp.Reset(ctx, "1", "ci-main", g.Token)
		if err != nil || s.ID != "1" {
			t.Fatalf("Reset = %v, %v", s, err)
		}
		// reset defaults to the provision command.
		want := []call{{provision.ActionReset, "1", "prov --slot"}, {provision.ActionHealth, "1", "check --slot"}}
		if got := tp.runner.Calls(); !reflect.DeepEqual(got, want) {
			t.Errorf("calls = %+v, want %+v", got, want)
		}
		if tp.slotState(t, "1") != lease.Held {
			t.Error("the slot is no longer held")
		}
	})
	t.Run("explicit reset command", func(t *testing.T) {
		tp := newTestPool(t, `{"provision":"p","reset":"r","slots":[{"id":1}]}`, pool.Options{})
		g := tp.mustAcquire(t, "ci-main")
		tp.runner.Reset()
		if _, err := tp.Reset(ctx, "1", "ci-main", g.Token); err != nil {
			t.Fatal(err)
		}
		if got := tp.runner.Calls(); len(got) != 1 || got[0].Script != "r" || got[0].Action != provision.ActionReset {
			t.Errorf("calls = %+v", got)
		}
	})
	tests := []struct {
		name  string
		setup func(tp *testPool) (owner, token string)
		want  error
	}{
		{"wrong token", func(tp *testPool) (string, string) { tp.mustAcquire(t, "ci-main"); return "ci-main", "nope" }, lease.ErrNotOwner},
		{"wrong owner", func(tp *testPool) (string, string) { g := tp.mustAcquire(t, "ci-main"); return "agent-7", g.Token }, lease.ErrNotOwner},
		{"free slot", func(tp *testPool) (string, string) { return "ci-main", "tok" }, lease.ErrNotHeld},
		{"expired slot", func(tp *testPool) (string, string) {
			g := tp.mustAcquire(t, "ci-main")
			tp.clock.Advance(31 * time.Minute)
			return "ci-main", g.Token
		}, lease.ErrExpired},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestPool(t, oneSlotPool, pool.Options{})
			owner, token := tc.setup(tp)
			tp.runner.Reset()
			if _, err := tp.Reset(ctx, "1", owner, token); !errors.Is(err, tc.want) {
				t.Errorf("Reset = %v, want %v", err, tc.want)
			}
			if calls := tp.runner.Calls(); len(calls) != 0 {
				t.Errorf("a refused reset ran %+v", calls)
			}
		})
	}
	t.Run("failing reset", func(t *testing.T) {
		tp := newTestPool(t, oneSlotPool, pool.Options{})
		g := tp.mustAcquire(t, "ci-main")
		tp.runner.SetFail(func(_ context.Context, c call) error {
			if c.Action == provision.ActionReset {
				return errBoom
			}
			return nil
		})
		_, err := tp.Reset(ctx, "1", "ci-main", g.Token)
		var se *pool.SlotError
		if !errors.Is(err, pool.ErrProvisionFailed) || !errors.As(err, &se) || se.State != pool.GrantResetFailed || !errors.Is(se.Cause, errBoom) {
			t.Errorf("Reset = %v", err)
		}
	})
}

func TestReprovision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("held slot is refused", func(t *testing.T) {
		tp := newTestPool(t, oneSlotPool, pool.Options{})
		g := tp.mustAcquire(t, "ci-main")
		tp.runner.Reset()
		if _, err := tp.Reprovision(ctx, "1", "broker"); !errors.Is(err, lease.ErrHeld) {
			t.Errorf("Reprovision = %v, want lease.ErrHeld", err)
		}
		if calls := tp.runner.Calls(); len(calls) != 0 {
			t.Errorf("ran %+v", calls)
		}
		st, _ := tp.Store().Status(context.Background(), "slot-1")
		if st.State != lease.Held || st.Record.Token != g.Token {
			t.Error("the holder lost the slot")
		}
	})
	t.Run("free slot runs reset and health and stays free", func(t *testing.T) {
		tp := newTestPool(t, oneSlotPool, pool.Options{})
		s, err := tp.Reprovision(ctx, "1", "broker")
		if err != nil || s.ID != "1" {
			t.Fatalf("Reprovision = %v, %v", s, err)
		}
		want := []call{{provision.ActionReset, "1", "prov --slot"}, {provision.ActionHealth, "1", "check --slot"}}
		if got := tp.runner.Calls(); !reflect.DeepEqual(got, want) {
			t.Errorf("calls = %+v, want %+v", got, want)
		}
		if tp.slotState(t, "1") != lease.Free {
			t.Error("the slot is not free afterwards")
		}
		if ev := eventsNamed(logEvents(t, tp.Dir()), "slot_reprovisioned"); len(ev) != 1 || ev[0]["owner"] != "broker" {
			t.Errorf("journal: %v", logEvents(t, tp.Dir()))
		}
	})
	t.Run("failing health leaves the slot free", func(t *testing.T) {
		tp := newTestPool(t, oneSlotPool, pool.Options{})
		tp.runner.SetFail(func(_ context.Context, c call) error {
			if c.Action == provision.ActionHealth {
				return errBoom
			}
			return nil
		})
		_, err := tp.Reprovision(ctx, "1", "broker")
		if !errors.Is(err, pool.ErrHealthFailed) {
			t.Errorf("Reprovision = %v, want ErrHealthFailed", err)
		}
		if tp.slotState(t, "1") != lease.Free {
			t.Error("the slot is not free afterwards")
		}
		if ev := eventsNamed(logEvents(t, tp.Dir()), "slot_reprovision_failed"); len(ev) != 1 {
			t.Errorf("journal: %v", logEvents(t, tp.Dir()))
		}
	})
	t.Run("expired slot is taken over", func(t *testing.T) {
		tp := newTestPool(t, oneSlotPool, pool.Options{})
		tp.mustAcquire(t, "ci-main")
		tp.clock.Advance(31 * time.Minute)
		if _, err := tp.Reprovision(ctx, "1", "broker"); err != nil {
			t.Fatal(err)
		}
		if tp.slotState(t, "1") != lease.Free {
			t.Error("the slot is not free afterwards")
		}
		if ev := eventsNamed(logEvents(t, tp.Dir()), "slot_takeover_on_reprovision"); len(ev) != 1 {
			t.Errorf("journal: %v", logEvents(t, tp.Dir()))
		}
	})
}

func TestHealth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("no health command", func(t *testing.T) {
		tp := newTestPool(t, `{"provision":"p","slots":[{"id":1}]}`, pool.Options{})
		s, checked, err := tp.Health(ctx, "1")
		if err != nil || checked || s.ID != "1" {
			t.Errorf("Health = %v, %v, %v; want not checked", s, checked, err)
		}
		if calls := tp.runner.Calls(); len(calls) != 0 {
			t.Errorf("ran %+v", calls)
		}
	})
	t.Run("health command from options", func(t *testing.T) {
		tp := newTestPool(t, `{"slots":[{"id":1}]}`, pool.Options{Health: "opt-health"})
		_, checked, err := tp.Health(ctx, "1")
		if err != nil || !checked {
			t.Errorf("Health = %v, %v", checked, err)
		}
		if calls := tp.runner.Calls(); len(calls) != 1 || calls[0] != (call{provision.ActionHealth, "1", "opt-health"}) {
			t.Errorf("calls = %+v", calls)
		}
	})
	t.Run("failing health needs no lease", func(t *testing.T) {
		tp := newTestPool(t, oneSlotPool, pool.Options{})
		tp.runner.SetFail(func(context.Context, call) error { return errBoom })
		_, checked, err := tp.Health(ctx, "1")
		if !checked || !errors.Is(err, pool.ErrHealthFailed) {
			t.Errorf("Health = %v, %v", checked, err)
		}
		if tp.slotState(t, "1") != lease.Free {
			t.Error("Health touched the lease")
		}
	})
}

func TestOpenCommandOverrides(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		file      string
		opts      pool.Options
		provision string
		reset     string
	}{
		{"file only", `{"provision":"p","slots":[{"id":1}]}`, pool.Options{}, "p", "p"},
		{"option provision also resets", `{"provision":"p","slots":[{"id":1}]}`, pool.Options{Provision: "P"}, "P", "P"},
		{"option provision keeps the file reset", `{"provision":"p","reset":"r","slots":[{"id":1}]}`, pool.Options{Provision: "P"}, "P", "r"},
		{"option reset", `{"provision":"p","slots":[{"id":1}]}`, pool.Options{Reset: "R"}, "p", "R"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestPool(t, tc.file, tc.opts)
			if provision, reset := tp.CommandsForTest(); provision != tc.provision || reset != tc.reset {
				t.Errorf("provision %q reset %q, want %q %q", provision, reset, tc.provision, tc.reset)
			}
		})
	}
	t.Run("poll is capped at a third of the waiter stale bound", func(t *testing.T) {
		tp := newTestPool(t, `{"waiterStaleMs":300,"slots":[{"id":1}]}`, pool.Options{Poll: time.Hour})
		if tp.PollForTest() != 100*time.Millisecond {
			t.Errorf("poll = %v", tp.PollForTest())
		}
	})
	t.Run("bad ttl option", func(t *testing.T) {
		cfg, _ := pool.Parse([]byte(`{"slots":[{"id":1}]}`), t.TempDir())
		st, _ := dirstore.Open(t.TempDir())
		if _, err := pool.Open(st, cfg, pool.Options{TTLMinutes: -1}); !errors.Is(err, pool.ErrInvalid) {
			t.Errorf("Open = %v", err)
		}
	})
}

func TestSweepReapsExpiredSlot(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, twoSlotPool, pool.Options{})
	ctx := context.Background()
	g := tp.mustAcquire(t, "ci-main")
	tp.clock.Advance(30 * time.Minute)
	if sw, err := tp.Pump(ctx, "broker"); err != nil || len(sw.ReapedSlots) != 0 {
		t.Fatalf("at exactly the ttl: Pump = %+v, %v; want nothing reaped", sw, err)
	}
	tp.clock.Advance(time.Millisecond)
	if tp.slotState(t, "1") != lease.Unknown {
		t.Fatal("slot-1 is not unknown past its ttl")
	}
	sw, err := tp.Pump(ctx, "broker")
	if err != nil {
		t.Fatal(err)
	}
	want := []pool.ReapedSlot{{Slot: json.Number("1"), PreviousOwner: "ci-main"}}
	if !reflect.DeepEqual(sw.ReapedSlots, want) {
		t.Errorf("reaped = %+v, want %+v", sw.ReapedSlots, want)
	}
	if tp.slotState(t, "1") != lease.Free {
		t.Error("slot-1 is not free after the reap")
	}
	ev := eventsNamed(logEvents(t, tp.Dir()), "slot_reaped")
	if len(ev) != 1 || ev[0]["slot_id"] != 1.0 {
		t.Fatalf("slot_reaped events = %v", ev)
	}
	if prev, _ := ev[0]["previous"].(map[string]any); prev["token"] != g.Token {
		t.Errorf("the journal does not carry the reaped record: %v", ev[0])
	}
	if _, _, err := tp.Heartbeat(ctx, "1", "ci-main", g.Token); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("heartbeat after the reap = %v", err)
	}
}

func TestLazySweepOnAcquire(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	tp.mustAcquire(t, "dead-holder")
	tp.clock.Advance(31 * time.Minute)
	tp.runner.Reset()
	g := tp.mustAcquire(t, "ci-main")
	if g.Slot != json.Number("1") {
		t.Errorf("grant = %+v", g)
	}
	if calls := tp.runner.Calls(); len(calls) != 2 || calls[0].Action != provision.ActionProvision {
		t.Errorf("the reclaimed slot was not provisioned again: %+v", calls)
	}
	if ev := eventsNamed(logEvents(t, tp.Dir()), "slot_reaped"); len(ev) != 1 {
		t.Errorf("journal: %v", logEvents(t, tp.Dir()))
	}
}

func TestSweepDropsStaleEntry(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	ctx := context.Background()
	tp.mustAcquire(t, "holder")
	q, err := tp.Request(ctx, "agent-7", "agent-7")
	if err != nil {
		t.Fatal(err)
	}
	tp.clock.Advance(90 * time.Second) // exactly the bound: still live
	if sw, _ := tp.Pump(ctx, "broker"); len(sw.DroppedEntries) != 0 {
		t.Fatalf("dropped at exactly waiterStale: %+v", sw)
	}
	tp.clock.Advance(time.Millisecond)
	sw, err := tp.Pump(ctx, "broker")
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.DroppedEntries) != 1 || sw.DroppedEntries[0].ID != q.RequestID || sw.DroppedEntries[0].Owner != "agent-7" {
		t.Fatalf("dropped = %+v", sw.DroppedEntries)
	}
	if entries := readQueue(tp.Pool); len(entries) != 0 {
		t.Errorf("queue = %+v", entries)
	}
	ev := eventsNamed(logEvents(t, tp.Dir()), "queue_entry_dropped_stale")
	if len(ev) != 1 {
		t.Fatalf("journal: %v", logEvents(t, tp.Dir()))
	}
	if e, _ := ev[0]["entry"].(map[string]any); e["id"] != q.RequestID {
		t.Errorf("event = %v", ev[0])
	}
	if _, err := tp.Claim(ctx, q.RequestID, "agent-7"); !errors.Is(err, pool.ErrUnknownRequest) {
		t.Errorf("Claim of a dropped request = %v", err)
	}
	if _, err := tp.Wait(ctx, q.RequestID, "agent-7", 0); !errors.Is(err, pool.ErrQueueEntryLost) {
		t.Errorf("Wait of a dropped request = %v", err)
	}
}

// TestStaleDropIsJournaled: every path that removes a silent waiter's
// entry should journal queue_entry_dropped_stale (PROTOCOL.md 6.3). A
// waiter's heartbeat (queue.go heartbeatEntry) rewrites the queue with only
// the live entries and drops the others silently; enqueue does the same.
// The sweep that precedes both usually gets there first, but an entry that
// goes stale in between disappears from the journal (seen in
// TestProcessesKilledWaiterIsDropped).
func TestStaleDropIsJournaled(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	ctx := context.Background()
	tp.mustAcquire(t, "holder")
	a, err := tp.Request(ctx, "agent-a", "")
	if err != nil {
		t.Fatal(err)
	}
	tp.clock.Advance(60 * time.Second)
	b, err := tp.Request(ctx, "agent-b", "")
	if err != nil {
		t.Fatal(err)
	}
	tp.clock.Advance(31 * time.Second) // a: 91 s silent (stale); b: 31 s (live)
	if _, _, err := tp.HeartbeatEntryForTest(ctx, b.RequestID, "agent-b"); err != nil {
		t.Fatal(err)
	}
	if entries := readQueue(tp.Pool); len(entries) != 1 || entries[0].ID != b.RequestID {
		t.Fatalf("queue = %+v, want only b", entries)
	}
	if ev := eventsNamed(logEvents(t, tp.Dir()), "queue_entry_dropped_stale"); len(ev) != 1 {
		t.Errorf("request %s was dropped from queue.json without a queue_entry_dropped_stale event (events: %v)",
			a.RequestID, ev)
	}
}

func TestSweepDeletesOldGrantFiles(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	g := tp.mustAcquire(t, "ci-main")
	path := grantPath(tp.Pool, g.RequestID)
	old := t0.Add(-25 * time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	young := filepath.Join(tp.Dir(), pool.GrantsDir, "young.json")
	if err := os.WriteFile(young, []byte("{}"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(young, t0.Add(-23*time.Hour), t0.Add(-23*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Pump(context.Background(), "broker"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a grant file older than 24h survived the sweep: %v", err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("a young grant file was deleted: %v", err)
	}
}

// waitResult is what a Wait goroutine returned.
type waitResult struct {
	g   *pool.Grant
	err error
}

func startWait(t *testing.T, tp *testPool, id, owner string) (<-chan waitResult, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan waitResult, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		g, err := tp.Wait(ctx, id, owner, 0)
		ch <- waitResult{g, err}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Error("Wait did not return after cancel")
		}
	})
	return ch, cancel
}

func recv(t *testing.T, ch <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return")
		return waitResult{}
	}
}

func TestRequestWaitClaim(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		nudges []pool.Nudge
	)
	tp := newTestPool(t, oneSlotPool, pool.Options{Notify: func(_ context.Context, n pool.Nudge) {
		mu.Lock()
		nudges = append(nudges, n)
		mu.Unlock()
	}})
	ctx := context.Background()
	holder := tp.mustAcquire(t, "holder")

	q, err := tp.Request(ctx, "agent-7", "session-7")
	if err != nil {
		t.Fatal(err)
	}
	if q.Position.Position != 1 || q.EtaMs != (8*time.Minute).Milliseconds() || q.Owner != "agent-7" || q.Session != "session-7" {
		t.Errorf("Request = %+v", q)
	}
	if ev := eventsNamed(logEvents(t, tp.Dir()), "request_queued"); len(ev) != 1 || ev[0]["request_id"] != q.RequestID {
		t.Errorf("journal: %v", ev)
	}
	done, _ := startWait(t, tp, q.RequestID, "agent-7")

	c, err := tp.Claim(ctx, q.RequestID, "agent-7")
	if err != nil || c.Grant != nil || c.Queued == nil || c.Queued.Position.Position != 1 || c.Queued.RequestID != q.RequestID {
		t.Fatalf("Claim while held = %+v, %v; want queued at 1", c, err)
	}
	// The waiter keeps its entry alive on the (fake) clock.
	time.Sleep(100 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("Wait returned while the slot was held: %+v", r)
	default:
	}

	if _, err := tp.Release(ctx, "1", "holder", holder.Token, false); err != nil {
		t.Fatal(err)
	}
	r := recv(t, done)
	if r.err != nil || r.g == nil {
		t.Fatalf("Wait = %+v", r)
	}
	g := r.g
	if g.RequestID != q.RequestID || g.Mode != pool.ModeAsync || g.Owner != "agent-7" || g.Slot != json.Number("1") {
		t.Errorf("grant = %+v", g)
	}

	mu.Lock()
	if len(nudges) != 1 {
		t.Fatalf("nudges = %+v, want 1", nudges)
	}
	n := nudges[0]
	mu.Unlock()
	if n.Event != "lease-granted" || n.Session != "session-7" || n.RequestID != q.RequestID || n.Grant == nil || n.Grant.Token != g.Token {
		t.Errorf("nudge = %+v", n)
	}
	b, _ := json.Marshal(n)
	var nm map[string]any
	_ = json.Unmarshal(b, &nm)
	if nm["requestId"] != q.RequestID || nm["request_id"] != q.RequestID || nm["event"] != "lease-granted" || nm["session"] != "session-7" {
		t.Errorf("nudge JSON = %s", b)
	}
	if _, err := os.Stat(filepath.Join(tp.Dir(), pool.NudgesFile)); !os.IsNotExist(err) {
		t.Errorf("an injected Notify still wrote nudges.jsonl: %v", err)
	}

	c, err = tp.Claim(ctx, q.RequestID, "agent-7")
	if err != nil || c.Grant == nil {
		t.Fatalf("Claim after the grant = %+v, %v", c, err)
	}
	var token, state string
	_ = json.Unmarshal(c.Grant["token"], &token)
	_ = json.Unmarshal(c.Grant["state"], &state)
	if token != g.Token || state != pool.GrantReady {
		t.Errorf("claimed grant token %q state %q", token, state)
	}

	t.Run("claim after the lease expired", func(t *testing.T) {
		tp.clock.Advance(31 * time.Minute)
		_, err := tp.Claim(ctx, q.RequestID, "agent-7")
		var ce *pool.ClaimError
		if !errors.Is(err, pool.ErrLeaseLost) || !errors.As(err, &ce) || ce.State != pool.GrantLeaseLost || string(ce.Slot) != "1" {
			t.Errorf("Claim = %v (%+v), want ErrLeaseLost with state lease_lost", err, ce)
		}
	})
}

func TestClaimAfterRelease(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, twoSlotPool, pool.Options{Notify: func(context.Context, pool.Nudge) {}})
	ctx := context.Background()
	q, err := tp.Request(ctx, "agent-7", "")
	if err != nil {
		t.Fatal(err)
	}
	done, _ := startWait(t, tp, q.RequestID, "agent-7")
	r := recv(t, done)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.g.Env["APP_PORT"] != "3000" {
		t.Errorf("grant env = %v", r.g.Env)
	}
	if q.Session != "agent-7" {
		t.Errorf("session = %q, want the owner by default", q.Session)
	}
	if _, err := tp.Release(ctx, "1", "agent-7", r.g.Token, false); err != nil {
		t.Fatal(err)
	}
	_, err = tp.Claim(ctx, q.RequestID, "agent-7")
	var ce *pool.ClaimError
	if !errors.Is(err, pool.ErrLeaseLost) || !errors.As(err, &ce) || ce.State != pool.GrantLeaseLost {
		t.Errorf("Claim after release = %v", err)
	}
	t.Run("slot held again by someone else", func(t *testing.T) {
		tp.mustAcquire(t, "ci-main") // takes slot 1 again, with a new token
		if _, err := tp.Claim(ctx, q.RequestID, "agent-7"); !errors.Is(err, pool.ErrLeaseLost) {
			t.Errorf("Claim with another holder = %v", err)
		}
	})
}

func TestClaimFailedGrant(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	ctx := context.Background()
	tp.runner.SetFail(func(_ context.Context, c call) error {
		if c.Action == provision.ActionProvision {
			return errBoom
		}
		return nil
	})
	q, err := tp.Request(ctx, "agent-7", "")
	if err != nil {
		t.Fatal(err)
	}
	done, _ := startWait(t, tp, q.RequestID, "agent-7")
	if r := recv(t, done); !errors.Is(r.err, pool.ErrProvisionFailed) {
		t.Fatalf("Wait = %+v", r)
	}
	_, err = tp.Claim(ctx, q.RequestID, "agent-7")
	var ce *pool.ClaimError
	if !errors.Is(err, pool.ErrProvisionFailed) || !errors.As(err, &ce) || ce.State != pool.GrantResetFailed || !strings.Contains(ce.Note, "boom") {
		t.Errorf("Claim = %v (%+v)", err, ce)
	}
}

func TestMissedNudgeIsRecoveredByClaim(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{}) // the default notifier, no command
	ctx := context.Background()
	q, err := tp.Request(ctx, "agent-7", "session-7")
	if err != nil {
		t.Fatal(err)
	}
	done, _ := startWait(t, tp, q.RequestID, "agent-7")
	r := recv(t, done)
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := storetest.JSONLines(t, filepath.Join(tp.Dir(), pool.NudgesFile))
	if len(lines) != 1 {
		t.Fatalf("nudges.jsonl has %d lines", len(lines))
	}
	n := lines[0]
	grant, _ := n["grant"].(map[string]any)
	if n["event"] != "lease-granted" || n["session"] != "session-7" || n["requestId"] != q.RequestID || n["request_id"] != q.RequestID || grant["token"] != r.g.Token {
		t.Errorf("nudge line = %v", n)
	}
	// Nobody read the nudge; the grant file is the truth.
	c, err := tp.Claim(ctx, q.RequestID, "agent-7")
	if err != nil || c.Grant == nil {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	var token string
	_ = json.Unmarshal(c.Grant["token"], &token)
	if token != r.g.Token {
		t.Errorf("claimed token %q, want %q", token, r.g.Token)
	}
}

func TestNudgeCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		opts pool.Options
		out  string // relative to the pool file's directory
	}{
		{"from options", oneSlotPool, pool.Options{NudgeCommand: "cat > nudge.out"}, "nudge.out"},
		{"from the pool file, in its cwd", `{"cwd":"sub","nudgeCommand":"cat >> nudge.out","slots":[{"id":1}]}`, pool.Options{}, "sub/nudge.out"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestPool(t, tc.file, tc.opts)
			if err := os.MkdirAll(filepath.Join(tp.root, "sub"), 0o777); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			q, err := tp.Request(ctx, "agent-7", "")
			if err != nil {
				t.Fatal(err)
			}
			done, _ := startWait(t, tp, q.RequestID, "agent-7")
			if r := recv(t, done); r.err != nil {
				t.Fatal(r.err)
			}
			got, err := os.ReadFile(filepath.Join(tp.root, tc.out))
			if err != nil {
				t.Fatalf("the nudge command wrote nothing: %v", err)
			}
			want, err := os.ReadFile(filepath.Join(tp.Dir(), pool.NudgesFile))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) || !strings.HasSuffix(string(got), "\n") || strings.Count(string(got), "\n") != 1 {
				t.Errorf("nudge command got %q, nudges.jsonl has %q", got, want)
			}
		})
	}
	t.Run("a failing nudge command does not fail the grant", func(t *testing.T) {
		tp := newTestPool(t, oneSlotPool, pool.Options{NudgeCommand: "exit 7"})
		q, err := tp.Request(context.Background(), "agent-7", "")
		if err != nil {
			t.Fatal(err)
		}
		done, _ := startWait(t, tp, q.RequestID, "agent-7")
		if r := recv(t, done); r.err != nil || r.g == nil {
			t.Errorf("Wait = %+v", r)
		}
	})
	t.Run("blocking acquires are never nudged", func(t *testing.T) {
		tp := newTestPool(t, oneSlotPool, pool.Options{NudgeCommand: "cat > nudge.out"})
		tp.mustAcquire(t, "ci-main")
		if _, err := os.Stat(filepath.Join(tp.root, "nudge.out")); !os.IsNotExist(err) {
			t.Errorf("a blocking grant ran the nudge command")
		}
		if _, err := os.Stat(filepath.Join(tp.Dir(), pool.NudgesFile)); !os.IsNotExist(err) {
			t.Errorf("a blocking grant wrote nudges.jsonl")
		}
	})
}

func TestWaitCancelled(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	ctx := context.Background()
	tp.mustAcquire(t, "holder")
	q, err := tp.Request(ctx, "agent-7", "")
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := startWait(t, tp, q.RequestID, "agent-7")
	time.Sleep(50 * time.Millisecond)
	cancel()
	if r := recv(t, done); !errors.Is(r.err, context.Canceled) {
		t.Errorf("Wait = %+v, want context.Canceled", r)
	}
	if entries := readQueue(tp.Pool); len(entries) != 0 {
		t.Errorf("queue = %+v, want the request gone", entries)
	}
	if ev := eventsNamed(logEvents(t, tp.Dir()), "request_abandoned"); len(ev) != 1 || ev[0]["request_id"] != q.RequestID {
		t.Errorf("journal: %v", logEvents(t, tp.Dir()))
	}
}

// TestBlockingWaitersFIFO: in-process waiters are granted in queue order.
// race_test.go checks the same with real processes.
func TestBlockingWaitersFIFO(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	holder := tp.mustAcquire(t, "holder")
	const n = 4
	type res struct {
		i int
		g *pool.Grant
	}
	order := make(chan res, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			g, err := tp.Acquire(ctx, pool.AcquireRequest{Owner: "waiter-" + string(rune('a'+i))})
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			order <- res{i, g}
			time.Sleep(10 * time.Millisecond)
			if _, err := tp.Release(context.Background(), "1", g.Owner, g.Token, false); err != nil {
				t.Errorf("waiter %d release: %v", i, err)
			}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for len(readQueue(tp.Pool)) != i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d never queued", i)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if _, err := tp.Release(context.Background(), "1", "holder", holder.Token, false); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	var got []int
	for r := range order {
		got = append(got, r.i)
	}
	if !reflect.DeepEqual(got, []int{0, 1, 2, 3}) {
		t.Errorf("grant order = %v, want queue order", got)
	}
}

// TestFutureEntryIsStale: a queue entry stamped further ahead of the clock
// than the stale bound (and a minute) allows is stale at once, so a planted
// or skewed stamp cannot hold the head of the queue; one stamped within the
// allowance is a live waiter.
func TestFutureEntryIsStale(t *testing.T) {
	t.Parallel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	ctx := context.Background()
	tp.mustAcquire(t, "holder")
	q, err := tp.Request(ctx, "agent-7", "agent-7")
	if err != nil {
		t.Fatal(err)
	}
	tp.clock.Advance(-90 * time.Second) // the clock is set back: the entry is 90 s ahead
	if sw, _ := tp.Pump(ctx, "broker"); len(sw.DroppedEntries) != 0 {
		t.Fatalf("dropped within the allowance: %+v", sw)
	}
	tp.clock.Advance(-time.Millisecond)
	sw, err := tp.Pump(ctx, "broker")
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.DroppedEntries) != 1 || sw.DroppedEntries[0].ID != q.RequestID {
		t.Fatalf("an entry more than the allowance ahead was kept: %+v", sw)
	}
}

// TestClaimWhileProvisioning: a grant leaves the queue before it provisions
// and writes its grant file after, so for as long as provisioning takes the
// request is in neither; a claim then must say it is being provisioned (on
// the slot its lease names), not that it is unknown, or the caller would
// request a second slot.
func TestClaimWhileProvisioning(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	tp := newTestPool(t, oneSlotPool, pool.Options{ScriptRunner: func(ctx context.Context, a provision.Action, s *pool.Slot, script string) error {
		if a == provision.ActionProvision {
			started <- struct{}{}
			<-release
		}
		return nil
	}})
	ctx := context.Background()
	q, err := tp.Request(ctx, "agent-7", "agent-7")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := tp.Wait(ctx, q.RequestID, "agent-7", 0)
		done <- err
	}()
	<-started
	cl, err := tp.Claim(ctx, q.RequestID, "someone-else")
	if err != nil || cl.Queued == nil || !cl.Queued.Provisioning || cl.Queued.Slot.ID != "1" {
		t.Fatalf("claim while provisioning = %+v, %v; want provisioning on slot 1", cl, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cl, err = tp.Claim(ctx, q.RequestID, "agent-7")
	if err != nil || cl.Grant == nil {
		t.Fatalf("claim after the grant = %+v, %v", cl, err)
	}
}
