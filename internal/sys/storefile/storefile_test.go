package storefile

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// A file replaced by a rename while a reader has it open (its old inode
// then has no link) is read whole, as lock-free readers of queue.json and
// records expect: it was taken for a planted hard link once, and a queue
// read as empty lost waiters' entries.
func TestReadWhileReplaced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "q.json")
	if err := Replace(path, ".tmp-0", []byte("{}\n"), Private); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := Replace(path, ".tmp-w", []byte("{}\n"), Private); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 20000; i++ {
		if _, err := Read(path, 1<<10); err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("read %d: %v", i, err)
		}
	}
	close(stop)
	wg.Wait()
}

// A second name for a store file (a hard link planted to a file
// elsewhere) is refused for reading and writing.
func TestHardLinkRefused(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "reaped.log")
	if err := os.Link(secret, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(link, 1<<10); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Read of a hard link: %v", err)
	}
	if err := Append(link, []byte("y"), Private); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Append to a hard link: %v", err)
	}
	if data, _ := os.ReadFile(secret); string(data) != "x" {
		t.Errorf("the linked file was written: %q", data)
	}
}
