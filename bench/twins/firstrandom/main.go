//go:build ignore

// Command firstrandom times the first read of random bytes in a fresh
// process, the one lease makes, two ways: the raw getrandom(2) system call
// (lease/random_linux.go) and x/sys/unix's Getrandom, which goes through
// the vDSO when the kernel offers it and then first allocates the vDSO's
// random state. Each way runs in RUNS fresh processes, taking turns; the
// medians are printed. Only the call is timed, inside the child, so the
// cost of starting a process does not blur it.
//
//	go run bench/twins/firstrandom/main.go [RUNS]
package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if way := os.Getenv("FIRSTRANDOM_CHILD"); way != "" {
		var b [64]byte
		start := time.Now()
		switch way {
		case "raw":
			if _, _, errno := unix.Syscall(unix.SYS_GETRANDOM, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0); errno != 0 {
				panic(errno)
			}
		case "unix":
			if _, err := unix.Getrandom(b[:], 0); err != nil {
				panic(err)
			}
		}
		fmt.Println(time.Since(start).Nanoseconds())
		return
	}
	runs := 200
	if len(os.Args) > 1 {
		runs, _ = strconv.Atoi(os.Args[1])
	}
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	ns := map[string][]int64{}
	for i := 0; i < runs; i++ {
		for _, way := range []string{"raw", "unix"} {
			c := exec.Command(exe)
			c.Env = append(os.Environ(), "FIRSTRANDOM_CHILD="+way)
			out, err := c.Output()
			if err != nil {
				panic(err)
			}
			n, _ := strconv.ParseInt(string(out[:len(out)-1]), 10, 64)
			ns[way] = append(ns[way], n)
		}
	}
	for _, way := range []string{"raw", "unix"} {
		slices.Sort(ns[way])
		fmt.Printf("%-5s first 64-byte read: median %.1f µs, p10 %.1f, p90 %.1f (%d processes)\n", way,
			float64(ns[way][runs/2])/1e3, float64(ns[way][runs/10])/1e3, float64(ns[way][runs*9/10])/1e3, runs)
	}
}
