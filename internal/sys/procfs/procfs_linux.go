package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Stat is what /proc/PID/stat says of a process.
type Stat struct {
	PID, PPID, PGRP, Session int
	// State is R, S, D, T (stopped), t (traced), Z (zombie), X (dead), ...
	State byte
	// Start is the start time, in clock ticks after boot: with the PID it
	// names a process across PID reuse.
	Start uint64
}

// Stopped reports a process in a stop (by a signal or a tracer).
func (s Stat) Stopped() bool { return s.State == 'T' || s.State == 't' }

// Gone reports a process that runs nothing any more (a zombie, or dead).
func (s Stat) Gone() bool { return s.State == 'Z' || s.State == 'X' }

// ErrMalformed reports a stat line that does not parse.
var ErrMalformed = errors.New("procfs: malformed stat line")

// ReadStat reads /proc/PID/stat. A process that is gone gives an error
// matching fs.ErrNotExist.
func ReadStat(pid int) (Stat, error) {
	var buf [1024]byte
	n, err := readFile("/proc/"+strconv.Itoa(pid)+"/stat", buf[:])
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(buf[:n])
}

// ParseStat reads a stat line: "pid (comm) state ppid pgrp session ...",
// whose command name may hold spaces and parentheses (the fields after it
// start after the last ')'); the start time is field 22.
func ParseStat(data []byte) (Stat, error) {
	open := bytes.IndexByte(data, '(')
	i := bytes.LastIndexByte(data, ')')
	if open < 1 || i < open {
		return Stat{}, ErrMalformed
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(data[:open])))
	if err != nil {
		return Stat{}, ErrMalformed
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, ErrMalformed
	}
	s := Stat{PID: pid, State: f[0][0]}
	ints := []*int{&s.PPID, &s.PGRP, &s.Session}
	for k, p := range ints {
		if *p, err = strconv.Atoi(string(f[1+k])); err != nil {
			return Stat{}, ErrMalformed
		}
	}
	if s.Start, err = strconv.ParseUint(string(f[19]), 10, 64); err != nil {
		return Stat{}, ErrMalformed
	}
	return s, nil
}

// Children lists the children of every thread of pid (nil when it is
// gone, or the kernel has no children lists: see HasChildrenLists).
func Children(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	tids, _ := d.Readdirnames(-1)
	d.Close()
	var out []int
	var buf [4096]byte
	for _, tid := range tids {
		n, err := readFile(dir+"/"+tid+"/children", buf[:])
		if err != nil {
			continue
		}
		for _, w := range bytes.Fields(buf[:n]) {
			if c, err := strconv.Atoi(string(w)); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// HasChildrenLists reports whether the kernel keeps the children lists
// Children reads (CONFIG_PROC_CHILDREN).
func HasChildrenLists() bool {
	_, err := os.Stat("/proc/self/task/" + strconv.Itoa(unix.Gettid()) + "/children")
	return err == nil
}

// PIDs lists every process /proc shows.
func PIDs() ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(names))
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(name); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// readFile reads a small file of /proc into buf with bare system calls
// (os.ReadFile registers the descriptor with the runtime's poller, which
// a process that does nothing else with it then starts for this read
// alone). A file longer than buf is an error.
func readFile(path string, buf []byte) (int, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		if err == unix.ENOENT || err == unix.ESRCH {
			return 0, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
		}
		return 0, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	n := 0
	for {
		if n == len(buf) {
			return 0, fmt.Errorf("procfs: %s is over %d bytes", path, len(buf))
		}
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			if err == unix.ESRCH {
				return 0, &fs.PathError{Op: "read", Path: path, Err: fs.ErrNotExist}
			}
			return 0, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			return n, nil
		}
		n += m
	}
}
