package procfs

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"testing"
)

func TestParseStat(t *testing.T) {
	line := []byte("4242 (a (b) c) S 1 4240 4239 0 -1 4194560 0 0 0 0 7 9 0 0 20 0 1 0 123456789 0 0\n")
	s, err := ParseStat(line)
	if err != nil || s != (Stat{PID: 4242, PPID: 1, PGRP: 4240, Session: 4239, State: 'S', UTime: 7, STime: 9, Start: 123456789}) {
		t.Fatalf("ParseStat = %+v, %v", s, err)
	}
	for _, bad := range []string{"", "4242 (x", "x (y) S 1 2 3", "4242 (y) SS 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", "4242 (y) S 1 2"} {
		if _, err := ParseStat([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseStat(%q) = %v; want ErrMalformed", bad, err)
		}
	}
}

func TestReadStatOfThisProcess(t *testing.T) {
	s, err := ReadStat(os.Getpid())
	if err != nil || s.PID != os.Getpid() || s.PPID != os.Getppid() || s.Start == 0 || s.Gone() {
		t.Fatalf("ReadStat(self) = %+v, %v", s, err)
	}
	if _, err := ReadStat(1 << 30); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadStat of no process = %v; want ErrNotExist", err)
	}
}

func TestThreadStatsOfThisProcess(t *testing.T) {
	threads := ThreadStats(os.Getpid())
	if len(threads) == 0 {
		t.Fatal("ThreadStats(self) is empty")
	}
	for _, th := range threads {
		if th.Gone() || th.Stopped() {
			t.Errorf("a thread of this running test is %c", th.State)
		}
	}
	if ThreadStats(1<<30) != nil {
		t.Error("ThreadStats of no process is not nil")
	}
}

// TestOpenFilesOfThisProcess: a file this process opens is among its open
// files, by its path, and a process that is gone is an error.
func TestOpenFilesOfThisProcess(t *testing.T) {
	path := t.TempDir() + "/marker"
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files, err := OpenFiles(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, path) {
		t.Errorf("OpenFiles(self) = %q, want %s among them", files, path)
	}
	if _, err := OpenFiles(1 << 30); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenFiles(no such process) error = %v, want fs.ErrNotExist", err)
	}
}
