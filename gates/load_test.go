package gates

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const minimalGate = "pool: ../pool.json\nphases:\n  - run: make test\n"

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// loadPromptly runs Load, failing the test if it does not return within a
// few seconds (a FIFO opened without O_NONBLOCK would block forever).
func loadPromptly(t *testing.T, path string) (*Gate, error) {
	t.Helper()
	type result struct {
		g   *Gate
		err error
	}
	done := make(chan result, 1)
	go func() {
		g, err := Load(path)
		done <- result{g, err}
	}()
	select {
	case r := <-done:
		return r.g, r.err
	case <-time.After(5 * time.Second):
		t.Fatalf("Load(%s) did not return", path)
		return nil, nil
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	valid := filepath.Join(dir, "repo", "ci", "gate.yaml")
	writeFile(t, valid, minimalGate)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	writeFile(t, big, "pool: a\nowner: "+strings.Repeat("x", maxFileSize)+"\n")
	link := filepath.Join(dir, "elsewhere", "gate.yaml")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(valid, link); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "pool: a\nphases: []\n")

	t.Run("valid", func(t *testing.T) {
		g, err := loadPromptly(t, valid)
		if err != nil {
			t.Fatal(err)
		}
		if g.Path != valid || g.Dir != filepath.Dir(valid) || g.Pool != filepath.Join(dir, "repo", "pool.json") {
			t.Errorf("Path %q Dir %q Pool %q", g.Path, g.Dir, g.Pool)
		}
	})
	t.Run("relative path", func(t *testing.T) {
		t.Chdir(filepath.Join(dir, "repo"))
		g, err := loadPromptly(t, "ci/gate.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if g.Path != valid {
			t.Errorf("Path %q, want %q", g.Path, valid)
		}
	})
	t.Run("symlink to a valid file", func(t *testing.T) {
		g, err := loadPromptly(t, link)
		if err != nil {
			t.Fatal(err)
		}
		// The file is named by the link: its directory is the link's.
		if g.Path != link || g.Pool != filepath.Join(dir, "pool.json") {
			t.Errorf("Path %q Pool %q", g.Path, g.Pool)
		}
	})

	tests := []struct {
		name string
		path string
		want string
	}{
		{"directory", dir, dir + ": gate file is a directory, not a regular file"},
		{"fifo", fifo, fifo + ": gate file is a named pipe (FIFO), not a regular file"},
		{"over 1 MiB", big, big + ": gate file is larger than 1048576 bytes (1 MiB)"},
		{"missing", filepath.Join(dir, "nope.yaml"), filepath.Join(dir, "nope.yaml") + ": cannot open gate file: no such file or directory"},
		{"invalid content", bad, bad + ":2:9: phases is empty: ..."},
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		tests = append(tests, struct{ name, path, want string }{"device", "/dev/zero", "/dev/zero: gate file is a character device, not a regular file"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := loadPromptly(t, tt.path)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", g)
			}
			checkMessage(t, err, tt.want)
		})
	}

	t.Run("missing matches fs.ErrNotExist", func(t *testing.T) {
		_, err := Load(filepath.Join(dir, "nope.yaml"))
		if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, ErrInvalid) {
			t.Errorf("error %v: want fs.ErrNotExist and ErrInvalid", err)
		}
		var e *Error
		if errors.As(err, &e) && e.Line != 0 {
			t.Errorf("Line %d, want 0", e.Line)
		}
	})
}
