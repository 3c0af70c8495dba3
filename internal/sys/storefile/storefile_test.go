package storefile

import (
	"errors"
	"io/fs"
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

// TestDescribeMode: every kind of file that is not a regular one is
// named, and a store file's raw mode reads as its fs.FileMode does.
func TestDescribeMode(t *testing.T) {
	for _, tc := range []struct {
		mode fs.FileMode
		want string
	}{
		{fs.ModeDir | 0o755, "a directory"},
		{fs.ModeSymlink | 0o777, "a symbolic link"},
		{fs.ModeNamedPipe | 0o600, "a named pipe (FIFO)"},
		{fs.ModeSocket | 0o600, "a socket"},
		{fs.ModeDevice | fs.ModeCharDevice | 0o666, "a character device"},
		{fs.ModeDevice | 0o660, "a block device"},
		{0o644, "a regular file"},
		{fs.ModeIrregular | 0o600, "a file of mode ?rw-------"},
	} {
		if got := DescribeMode(tc.mode); got != tc.want {
			t.Errorf("DescribeMode(%v) = %q, want %q", tc.mode, got, tc.want)
		}
	}
}
