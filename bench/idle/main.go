//go:build ignore

// Run it with `go run bench/idle/main.go`: the build tag keeps this
// benchmark out of `go install ./...`.

// Command idle measures what waiters cost while nothing happens: N real
// `lease acquire --wait-ms` processes on one held lease, or N real `pool
// acquire` processes on a held one-slot pool, started and left to settle,
// then the CPU time they use over a window (utime + stime from
// /proc/PID/stat), as a share of one core. Run it from the repository
// root:
//
//	go run bench/idle/main.go -n 1,10,50,200 -only lease,pool
//	go run bench/idle/main.go -n 200 -base 1bb7e33     # the same, side by side with a commit
//	go run bench/idle/main.go -n 100 -etcd etcd://127.0.0.1:2379/bench   # on etcd
//
// It builds the CLIs (CGO_ENABLED=0) into a temporary directory; with
// -base it also builds that commit's (in a temporary git worktree) and
// measures both, one after the other, for every N.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/procfs"
)

func main() {
	ns := flag.String("n", "1,10,50,200", "comma-separated waiter counts")
	only := flag.String("only", "lease,pool", "which waiters: lease, pool or both")
	window := flag.Duration("window", 10*time.Second, "how long to measure")
	settle := flag.Duration("settle", 3*time.Second, "pause after the last waiter started")
	base := flag.String("base", "", "a commit to measure side by side (built in a git worktree)")
	dir := flag.String("dir", "", "parent of the working directories (default: the system temporary directory)")
	etcd := flag.String("etcd", "", "an etcd:// store URL under which each measurement gets a prefix of its own (default: directory stores)")
	flag.Parse()
	etcdBase = *etcd
	if err := run(*ns, *only, *window, *settle, *base, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "idle:", err)
		os.Exit(1)
	}
}

type build struct{ name, bin string }

var (
	etcdBase string
	serial   int
)

func run(nsFlag, only string, window, settle time.Duration, base, parent string) error {
	var ns []int
	for _, f := range strings.Split(nsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-n: %q is not a waiter count", f)
		}
		ns = append(ns, n)
	}
	tmp, err := os.MkdirTemp(parent, "idle-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	builds := []build{{"this", filepath.Join(tmp, "bin")}}
	if err := goBuild(".", builds[0].bin); err != nil {
		return err
	}
	if base != "" {
		wt := filepath.Join(tmp, "base-src")
		if out, err := exec.Command("git", "worktree", "add", "-q", "--detach", wt, base).CombinedOutput(); err != nil {
			return fmt.Errorf("git worktree add %s: %v\n%s", base, err, out)
		}
		defer exec.Command("git", "worktree", "remove", "--force", wt).Run()
		builds = append(builds, build{"base " + base, filepath.Join(tmp, "base-bin")})
		if err := goBuild(wt, builds[1].bin); err != nil {
			return err
		}
	}
	fmt.Printf("window %s after %s of settling; CPU of the waiters as a share of one core\n\n", window, settle)
	fmt.Printf("%-6s %-5s", "kind", "N")
	for _, b := range builds {
		fmt.Printf("  %-18s", b.name)
	}
	if len(builds) == 2 {
		fmt.Printf("  ratio")
	}
	fmt.Println()
	for _, kind := range strings.Split(only, ",") {
		kind = strings.TrimSpace(kind)
		if kind != "lease" && kind != "pool" {
			return fmt.Errorf("-only: %q is neither lease nor pool", kind)
		}
		for _, n := range ns {
			fmt.Printf("%-6s %-5d", kind, n)
			var cores []float64
			for _, b := range builds {
				c, ino, err := measure(b.bin, kind, n, window, settle, tmp)
				if err != nil {
					return err
				}
				cores = append(cores, c)
				fmt.Printf("  %-18s", fmt.Sprintf("%.4f cores, %d ino", c, ino))
			}
			if len(cores) == 2 && cores[1] > 0 {
				fmt.Printf("  %.3fx", cores[0]/cores[1])
			}
			fmt.Println()
		}
	}
	return nil
}

func goBuild(src, out string) error {
	cmd := exec.Command("go", "build", "-o", out+string(filepath.Separator), "./cmd/lease", "./cmd/pool", "./cmd/durable-lease-etcd")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build in %s: %v\n%s", src, err, b)
	}
	return nil
}

// measure starts n waiters of kind on a held lease or slot in a fresh
// store, lets them settle, and returns the cores they used in window and
// how many inotify instances they hold at its end.
func measure(bin, kind string, n int, window, settle time.Duration, tmp string) (cores float64, inotify int, err error) {
	work, err := os.MkdirTemp(tmp, kind+"-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(work)
	store := filepath.Join(work, "store")
	poolFile := filepath.Join(work, "pool.json")
	if err := os.WriteFile(poolFile, []byte(`{"name":"idle","slots":[{"id":1}],"provision":"true"}`), 0o600); err != nil {
		return 0, 0, err
	}
	if etcdBase != "" {
		serial++
		store = fmt.Sprintf("%s/idle-%d-%s%d", etcdBase, os.Getpid(), kind, serial)
	}
	env := append(os.Environ(), "LEASE_STORE="+store, "HOME="+work)
	hold := exec.Command(filepath.Join(bin, "lease"), "acquire", "--kind", "held", "--owner", "holder", "--ttl", "60")
	args := func(i int) []string {
		return []string{"acquire", "--kind", "held", "--owner", fmt.Sprintf("w%d", i), "--ttl", "1", "--wait-ms", "3600000"}
	}
	prog := filepath.Join(bin, "lease")
	if kind == "pool" {
		hold = exec.Command(filepath.Join(bin, "pool"), "--pool", poolFile, "acquire", "--owner", "holder", "--ttl", "60", "--no-wait")
		prog = filepath.Join(bin, "pool")
		args = func(i int) []string {
			return []string{"--pool", poolFile, "acquire", "--owner", fmt.Sprintf("w%d", i), "--wait-ms", "3600000"}
		}
	}
	hold.Env = env
	if out, err := hold.CombinedOutput(); err != nil || !json.Valid(bytes.TrimSpace(out)) {
		return 0, 0, fmt.Errorf("holding the %s: %v\n%s", kind, err, out)
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_, _ = p.Process.Wait()
		}
	}()
	for i := range n {
		c := exec.Command(prog, args(i)...)
		c.Env = env
		logf, err := os.Create(filepath.Join(work, fmt.Sprintf("waiter-%d.log", i)))
		if err != nil {
			return 0, 0, err
		}
		c.Stdout, c.Stderr = logf, logf
		defer logf.Close()
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			return 0, 0, err
		}
		procs = append(procs, c)
	}
	time.Sleep(settle)
	before, err := ticks(procs)
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	time.Sleep(window)
	after, err := ticks(procs)
	if err != nil {
		return 0, 0, err
	}
	const clkTck = 100 // sysconf(_SC_CLK_TCK) on Linux
	cores = float64(after-before) / clkTck / time.Since(t0).Seconds()
	for _, p := range procs {
		files, _ := procfs.OpenFiles(p.Process.Pid)
		for _, l := range files {
			if l == "anon_inode:inotify" {
				inotify++
			}
		}
	}
	return cores, inotify, nil
}

// ticks sums utime and stime of the processes, failing if one ended.
func ticks(procs []*exec.Cmd) (int64, error) {
	var sum int64
	for _, p := range procs {
		st, err := procfs.ReadStat(p.Process.Pid)
		if err != nil || st.Gone() {
			out := ""
			if f, ok := p.Stdout.(*os.File); ok {
				b, _ := os.ReadFile(f.Name())
				out = string(b)
			}
			return 0, fmt.Errorf("waiter %d (%s) ended early: %q", p.Process.Pid, strings.Join(p.Args[1:], " "), out)
		}
		sum += int64(st.UTime + st.STime)
	}
	return sum, nil
}
