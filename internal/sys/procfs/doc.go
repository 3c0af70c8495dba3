// Package procfs reads what the project needs of Linux's /proc, in one
// place: a process's stat line (its state, parent, process group,
// session and start time), the children of a process, and the list of
// processes. Reads use bare system calls into a small buffer: a CLI that
// reads one stat line does not start the runtime's poller for it.
package procfs
