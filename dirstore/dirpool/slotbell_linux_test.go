package dirpool

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/internal/sys/procfs"
	"github.com/durable-lease/durable-lease/pool"
)

// helperEnv selects the role of a re-executed test binary.
const helperEnv = "DURABLE_LEASE_DIRPOOL_HELPER"

// TestHelperProcess is not a test: it is the body of the child processes
// the tests below start by re-executing the test binary.
func TestHelperProcess(t *testing.T) {
	switch os.Getenv(helperEnv) {
	case "":
		t.Skip("helper process only")
	case "acquire":
		if err := helperAcquire(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(2)
		}
		os.Exit(0)
	default:
		fmt.Fprintln(os.Stderr, "helper: unknown role")
		os.Exit(2)
	}
}

// helperAcquire waits in the pool of LEASE_TEST_POOL_FILE, whose poll is
// as long as its waiterStaleMs allows (a third of an hour), and prints
// its grant's token.
func helperAcquire() error {
	st, err := dirstore.Open(os.Getenv("LEASE_TEST_DIR"))
	if err != nil {
		return err
	}
	cfg, err := pool.LoadFile(os.Getenv("LEASE_TEST_POOL_FILE"))
	if err != nil {
		return err
	}
	p, err := pool.Open(st, cfg, pool.Options{Poll: time.Hour, ScriptRunner: noScript})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g, err := p.Acquire(ctx, pool.AcquireRequest{Owner: "waiter"})
	if err != nil {
		return err
	}
	_, err = fmt.Println("granted", g.Token)
	return err
}

// TestOneSlotWaiterWaitsOnTheSlotsBell: the waiter of a pool of one slot,
// held by this implementation, is woken by the slot's bell in the store,
// which the release rings, and holds no inotify instance (whose teardown
// would delay its exit). Its poll is twenty minutes, so nothing else could
// end its wait.
func TestOneSlotWaiterWaitsOnTheSlotsBell(t *testing.T) {
	t.Parallel()
	const poolJSON = `{"waiterStaleMs": 3600000, "slots": [{"id": 1}]}`
	p := newRealPool(t, poolJSON, pool.Options{})
	ctx := context.Background()
	held, err := p.Acquire(ctx, pool.AcquireRequest{Owner: "holder", NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=acquire", "LEASE_TEST_DIR="+p.Store().Dir(),
		"LEASE_TEST_POOL_FILE="+filepath.Join(filepath.Dir(p.Store().Dir()), "pool.json"))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	// The waiter is listening once it has the slot's bell open.
	bell := filepath.Join(p.Store().Dir(), ".bell-"+held.Kind)
	var files []string
	for deadline := time.Now().Add(30 * time.Second); ; {
		files = openFiles(t, cmd.Process.Pid)
		if contains(files, bell) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter never opened the slot's bell %s; it has open: %q", bell, files)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if contains(files, "anon_inode:inotify") {
		t.Errorf("the waiter of a one-slot pool watches with inotify: %q", files)
	}
	if _, err := p.Release(ctx, fmt.Sprint(held.Slot), held.Owner, held.Token, false); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-line:
		if !strings.HasPrefix(got, "granted ") {
			t.Fatalf("waiter printed %q", got)
		}
	case <-time.After(time.Minute):
		t.Fatal("the release did not wake the waiter (its poll is twenty minutes)")
	}
}

func openFiles(t *testing.T, pid int) []string {
	t.Helper()
	files, err := procfs.OpenFiles(pid)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
