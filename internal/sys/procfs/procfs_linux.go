package procfs

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

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

// Children lists the children of every thread of pid (nil when it is
// gone, or the kernel has no children lists: see HasChildrenLists).
func Children(pid int) []int {
	var out []int
	var buf [4096]byte
	eachTask(pid, "children", buf[:], func(data []byte) {
		for _, w := range bytes.Fields(data) {
			if c, err := strconv.Atoi(string(w)); err == nil {
				out = append(out, c)
			}
		}
	})
	return out
}

// ThreadStats reads the stat line of every thread of pid
// (/proc/PID/task/TID/stat): a process is wholly stopped only when each
// of them is. Nil when pid is gone.
func ThreadStats(pid int) []Stat {
	var out []Stat
	var buf [1024]byte
	eachTask(pid, "stat", buf[:], func(data []byte) {
		if st, err := ParseStat(data); err == nil {
			out = append(out, st)
		}
	})
	return out
}

// eachTask reads the file name of every thread of pid into buf and hands
// fn what it read; threads that end meanwhile are passed over.
func eachTask(pid int, name string, buf []byte, fn func([]byte)) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	tids, _ := d.Readdirnames(-1)
	d.Close()
	for _, tid := range tids {
		if n, err := readFile(dir+"/"+tid+"/"+name, buf); err == nil {
			fn(buf[:n])
		}
	}
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

// OpenFiles lists what process pid has open: the targets of its
// /proc/PID/fd links ("pipe:[…]", "anon_inode:inotify", a path).
func OpenFiles(pid int) ([]string, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		if target, err := os.Readlink(dir + "/" + e.Name()); err == nil {
			out = append(out, target)
		}
	}
	return out, nil
}
