package procfs

import (
	"bytes"
	"errors"
	"strconv"
)

// Stat is what /proc/PID/stat says of a process.
type Stat struct {
	PID, PPID, PGRP, Session int
	// State is R, S, D, T (stopped), t (traced), Z (zombie), X (dead), ...
	State byte
	// UTime and STime are the CPU time spent in user and kernel mode, in
	// clock ticks.
	UTime, STime uint64
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

// ParseStat reads a stat line: "pid (comm) state ppid pgrp session ...",
// whose command name may hold spaces and parentheses (the fields after it
// start after the last ')'); utime and stime are fields 14 and 15, the start time field 22.
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
	for _, u := range [...]struct {
		field int
		p     *uint64
	}{{11, &s.UTime}, {12, &s.STime}, {19, &s.Start}} {
		if *u.p, err = strconv.ParseUint(string(f[u.field]), 10, 64); err != nil {
			return Stat{}, ErrMalformed
		}
	}
	return s, nil
}
