package torture

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/procfs"
)

// Profile describes one run.
type Profile struct {
	Mode       string  // "lease" (one kind) or "pool"
	Lanes      int     // concurrent client processes
	OpsPerLane int     // lease operations per lane, over all its processes
	Segment    int     // operations per client process; a lane runs processes until its ops are done
	Slots      int     // pool mode: number of slots
	TTLMinutes float64 // lease / slot TTL
	KillRate   float64 // fraction of client processes SIGKILLed
	Seed       uint64
	// MaxGap bounds the time between two successful acquisitions of the
	// lease (lease mode) or of any slot (pool mode) while clients run.
	MaxGap time.Duration
	// StrictGuard makes any guard_busy failure a violation; otherwise
	// such starved operations are only counted.
	StrictGuard bool
	// Wait, when set, makes every acquire wait up to a random part of it
	// (lease mode: AcquireWait; pool mode: a queued wait) instead of
	// mostly trying once: with many lanes, a herd of blocked waiters, some
	// of which are killed while they wait.
	Wait time.Duration
	// Provision is the pool's provision command. The default runs a
	// sleep on every grant, for the kills aimed at a running provision:
	// on slot 1 for longer than the TTL, so that the grant lives on its
	// heartbeats while it provisions; on the others for 20 ms, so that
	// most grants are quick and the run is about the ops, not the waits.
	// (A one-statement command gets the slot id appended as its last
	// argument: "sleep 0.02" would sleep 1.02 s on slot 1.)
	Provision string
	Binary    string // the executable to run as a client (os.Args[0])
	Dir       string // work directory (store, journals, resources)
}

// Kill records one SIGKILL and where it landed.
type Kill struct {
	Client string   `json:"client"`
	Target string   `json:"target"` // what the supervisor waited for: random, guard, tmp, cs, provision
	Where  []string `json:"where"`  // what the dead process left: guard, guard-new, tmp, cs, provisioning, in-<op>, between-calls
}

// Result is what Run observed.
type Result struct {
	Profile   Profile
	Processes int
	Kills     []Kill
	Failed    []string // survivors that did not exit 0
	FinalErr  string
	Wall      time.Duration
}

// Run runs a profile to completion and returns what it saw; Check judges it.
func Run(ctx context.Context, pr Profile) (*Result, error) {
	start := time.Now()
	store, jdir, res := filepath.Join(pr.Dir, "store"), filepath.Join(pr.Dir, "journals"), filepath.Join(pr.Dir, "res")
	for _, d := range []string{store, jdir, res} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	kinds := []string{"baton"}
	poolFile := filepath.Join(pr.Dir, "pool.json")
	if pr.Mode == "pool" {
		kinds = nil
		var slots []string
		for i := 1; i <= pr.Slots; i++ {
			kinds = append(kinds, fmt.Sprintf("slot-%d", i))
			slots = append(slots, fmt.Sprintf(`{"id": %d}`, i))
		}
		stale := max(1000, int(pr.TTLMinutes*60_000))
		provision := pr.Provision
		if provision == "" {
			provision = fmt.Sprintf(`d=0.02; [ "$1" = 1 ] && d=%.2f; sleep "$d"`, pr.TTLMinutes*60*1.2)
		}
		cfg := fmt.Sprintf(`{"ttlMinutes": %g, "provision": %q, "waiterStaleMs": %d, "slots": [%s]}`, pr.TTLMinutes, provision, stale, strings.Join(slots, ", "))
		if err := os.WriteFile(poolFile, []byte(cfg), 0o644); err != nil {
			return nil, err
		}
	}
	watch := kinds // kinds whose guard a kill may target
	if pr.Mode == "pool" {
		watch = append(append([]string(nil), kinds...), "pool-queue")
	}
	rng := rand.New(rand.NewPCG(pr.Seed, 1))
	var mu sync.Mutex
	out := &Result{Profile: pr}
	var meanLife time.Duration = 2 * time.Second
	nextID := 0
	newClient := func(lane int) (string, uint64) {
		mu.Lock()
		defer mu.Unlock()
		nextID++
		out.Processes++
		return fmt.Sprintf("c%02d-%04d", lane, nextID), rng.Uint64()
	}
	spawn := func(role, name string, seed uint64, ops int, extra ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, pr.Binary, "-test.run=^$")
		cmd.Env = append(os.Environ(),
			EnvRole+"="+role, envMode+"="+pr.Mode, envStore+"="+store, envPool+"="+poolFile,
			envKind+"="+kinds[0], envJournal+"="+filepath.Join(jdir, name+".jsonl"), envRes+"="+res,
			envClient+"="+name, envOps+"="+strconv.Itoa(ops), envTTL+"="+strconv.FormatFloat(pr.TTLMinutes, 'g', -1, 64),
			envSeed+"="+strconv.FormatUint(seed, 10), envWait+"="+strconv.FormatInt(pr.Wait.Milliseconds(), 10))
		cmd.Env = append(cmd.Env, extra...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Stdout = &stderr
		return cmd
	}
	var wg sync.WaitGroup
	for lane := range pr.Lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			remaining := pr.OpsPerLane
			for remaining > 0 && ctx.Err() == nil {
				name, seed := newClient(lane)
				ops := min(pr.Segment, remaining)
				mu.Lock()
				victim := rng.Float64() < pr.KillRate
				targets := []string{"random", "guard", "tmp", "cs"}
				if pr.Mode == "pool" {
					targets = append(targets, "provision", "provision")
				}
				target := targets[rng.IntN(len(targets))]
				delay := time.Duration(rng.Int64N(int64(meanLife) + 1))
				limit := meanLife * 2
				mu.Unlock()
				cmd := spawn("client", name, seed, ops)
				began := time.Now()
				if err := cmd.Start(); err != nil {
					mu.Lock()
					out.Failed = append(out.Failed, name+": "+err.Error())
					mu.Unlock()
					return
				}
				exited := make(chan struct{})
				classified := make(chan struct{})
				var kill *Kill
				if victim {
					kill = &Kill{Client: name, Target: target}
					go func() {
						defer close(classified)
						watchAndKill(cmd.Process.Pid, kill, store, res, name, watch, delay, limit, exited)
					}()
				} else {
					close(classified)
				}
				err := cmd.Wait()
				close(exited)
				<-classified
				life := time.Since(began)
				mu.Lock()
				killed := false
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL && kill != nil {
					killed = true
				}
				switch {
				case killed:
					out.Kills = append(out.Kills, *kill)
				case err != nil:
					out.Failed = append(out.Failed, fmt.Sprintf("%s: %v: %s", name, err, tail(cmd.Stderr.(*bytes.Buffer).String())))
				default:
					meanLife = (meanLife*7 + life) / 8
				}
				mu.Unlock()
				done := countOps(filepath.Join(jdir, name+".jsonl"))
				if !killed {
					done = ops
				}
				remaining -= max(done, 1)
			}
		}()
	}
	wg.Wait()
	// The end-of-run liveness proof: a fresh process takes every kind.
	cmd := spawn("final", "final", pr.Seed, 0, envKinds+"="+strings.Join(kinds, ","))
	if err := cmd.Run(); err != nil {
		out.FinalErr = fmt.Sprintf("%v: %s", err, tail(cmd.Stderr.(*bytes.Buffer).String()))
	}
	out.Wall = time.Since(start)
	b, _ := json.MarshalIndent(out, "", "  ")
	_ = os.WriteFile(filepath.Join(pr.Dir, "run.json"), b, 0o644)
	return out, nil
}

func tail(s string) string {
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return strings.TrimSpace(s)
}

// countOps counts the lease operations a client's journal shows completed.
func countOps(path string) int {
	data, _ := os.ReadFile(path)
	n := 0
	for _, l := range bytes.Split(data, []byte("\n")) {
		if bytes.Contains(l, []byte(`"ph":"end"`)) && (bytes.Contains(l, []byte(`"op":"acquire"`)) || bytes.Contains(l, []byte(`"op":"heartbeat"`)) || bytes.Contains(l, []byte(`"op":"release"`))) {
			n++
		}
	}
	return n
}

// watchAndKill SIGKILLs pid: at once when the moment it targets comes
// (the process holds a kind's guard, has a record temporary written inside
// it, is inside the fenced critical section, or runs a provision
// command), or after delay (random), or at the latest after limit. Then it
// classifies what the dead process left behind.
func watchAndKill(pid int, k *Kill, store, res, client string, kinds []string, delay, limit time.Duration, exited <-chan struct{}) {
	start := time.Now()
	var provisioning bool
	old := map[string]bool{} // temporaries left by earlier kills
	for _, n := range tmpFiles(store) {
		old[n] = true
	}
	hitNow := func() bool {
		hit := false
		switch k.Target {
		case "guard":
			hit = guardKind(store, kinds, pid) != ""
		case "tmp":
			if kind := guardKind(store, kinds, pid); kind != "" {
				for _, n := range tmpFiles(store) {
					hit = hit || !old[n] && strings.HasPrefix(filepath.Base(n), ".tmp-"+kind+"-")
				}
			}
		case "cs":
			for _, kind := range kinds {
				if f, err := os.Open(filepath.Join(res, kind+".res")); err == nil {
					hit = hit || strings.HasPrefix(lastLine(f), "enter "+client+" ")
					f.Close()
				}
			}
		case "provision":
			hit = hasChildren(pid)
		}
		return hit
	}
	for {
		select {
		case <-exited:
			return
		default:
		}
		el := time.Since(start)
		if k.Target == "random" && el >= delay || el >= limit {
			if k.Target != "random" {
				k.Target += "-missed"
			}
			break
		}
		if k.Target != "random" && hitNow() {
			// Freeze it and look again: kill only if the moment is
			// still there once every thread has stopped.
			_ = syscall.Kill(pid, syscall.SIGSTOP)
			waitStopped(pid)
			if hitNow() {
				break
			}
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		if k.Target == "random" {
			time.Sleep(time.Millisecond)
		} else {
			time.Sleep(200 * time.Microsecond)
		}
	}
	provisioning = hasChildren(pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	<-exited
	// Classify from what is left.
	if provisioning {
		k.Where = append(k.Where, "provisioning")
	}
	if kind := guardKind(store, kinds, pid); kind != "" {
		k.Where = append(k.Where, "guard")
		fresh := 0
		for _, n := range tmpFiles(store) {
			if !old[n] && strings.HasPrefix(filepath.Base(n), ".tmp-"+kind+"-") {
				fresh++
			}
		}
		if fresh > 0 && guardKind(store, kinds, pid) == kind {
			k.Where = append(k.Where, "tmp")
		}
	}
	if names, _ := filepath.Glob(filepath.Join(store, ".guard-*.new-*", "holder.json")); len(names) > 0 {
		for _, n := range names {
			if holderPid(n) == pid {
				k.Where = append(k.Where, "guard-new")
				break
			}
		}
	}
	if last := lastEntry(filepath.Join(filepath.Dir(res), "journals", client+".jsonl")); last != nil && last.Phase == "begin" {
		if last.Op == "cs" {
			k.Where = append(k.Where, "cs")
		} else {
			k.Where = append(k.Where, "in-"+last.Op)
		}
	} else {
		k.Where = append(k.Where, "between-calls")
	}
	sort.Strings(k.Where)
}

// waitStopped waits (up to 100 ms) until every thread of pid is stopped.
func waitStopped(pid int) {
	deadline := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(deadline) {
		tasks := procfs.ThreadStats(pid)
		all := len(tasks) > 0
		for _, t := range tasks {
			if !t.Stopped() {
				all = false
			}
		}
		if all {
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func guardKind(store string, kinds []string, pid int) string {
	for _, kind := range kinds {
		if holderPid(filepath.Join(store, ".guard-"+kind, "holder.json")) == pid {
			return kind
		}
	}
	return ""
}

func holderPid(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	var h struct{ Pid int }
	if json.Unmarshal(data, &h) != nil {
		return 0
	}
	return h.Pid
}

func tmpFiles(store string) []string {
	names, _ := filepath.Glob(filepath.Join(store, ".tmp-*"))
	return names
}

func hasChildren(pid int) bool { return len(procfs.Children(pid)) > 0 }

func lastEntry(path string) *Entry {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var e Entry
	if json.Unmarshal([]byte(lastLine(f)), &e) != nil {
		return nil
	}
	return &e
}
