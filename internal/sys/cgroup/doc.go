// Package cgroup makes, watches and ends the cgroup v2 directories that
// hold a pool-run's work: the kernel, not a supervising process, then
// knows every process of the run, freezes them (cgroup.freeze), kills
// them all at once (cgroup.kill) and says when none is left (populated 0
// in cgroup.events), whatever happened to the processes that started
// them.
//
// Only the core files of cgroup v2 are used, which need no controller;
// pids.max is set where the pids controller is enabled for the run's
// parent. The hierarchy is found from /proc/self/mountinfo (a host may
// mount it at /sys/fs/cgroup, or at /sys/fs/cgroup/unified beside the v1
// controllers), never from a fixed path. Off Linux every function fails
// with [ErrUnsupported].
package cgroup
