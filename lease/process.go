package lease

// Process identifies a process of this host well enough for another process
// to prove later that it has died: a pid is only the same process if its
// start time, the boot id and the pid namespace match too. Guards record it
// in their holder file; a caller may store it in a lease's payload so that a
// lease held for a process that died can be recovered before its TTL.
type Process struct {
	PID   int    `json:"pid"`
	Host  string `json:"host,omitempty"`
	Boot  string `json:"boot,omitempty"`
	PIDNS string `json:"pidns,omitempty"`
	Start uint64 `json:"start,omitempty"`
}

// Self describes the calling process.
func Self() Process {
	return self()
}

// Dead reports whether p has provably exited, or ran before the last
// reboot. It is false whenever this process cannot tell: p lacks the
// identity fields, or lives on another host or in another pid namespace.
func (p Process) Dead() bool {
	alive, _, known := p.Alive()
	return known && !alive
}
