package runner

import (
	"encoding/json"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// pool-run and its guardian talk over a socket pair, one JSON object a
// line. pool-run (the lease holder) tells the guardian what to run and,
// after every confirmed heartbeat, until when the lease is safely held;
// the guardian (the parent of the work) runs it, and ends it on its own
// when that time comes without a renewal or when pool-run dies.

// Operations from pool-run to the guardian.
const (
	opStart   = "start"   // run the command (Start) or wait for phases
	opUntil   = "until"   // the lease is safely held until Until
	opPhase   = "phase"   // run a gate phase (Phase)
	opSignal  = "signal"  // send Sig to every process of the work
	opStop    = "stop"    // SIGTERM the work, SIGKILL after Grace
	opKill    = "kill"    // SIGKILL the work now
	opSuspend = "suspend" // stop the work (SIGSTOP), answered by opSuspended
	opResume  = "resume"  // the lease was confirmed (Until): continue the work
	opDone    = "done"    // the lease is released: exit when the work is gone
)

// Operations from the guardian to pool-run.
const (
	opStarted   = "started"   // the work runs as Pid
	opExited    = "exited"    // the work and all it started are gone: Status, Why
	opSuspended = "suspended" // the work is stopped
	opConfirm   = "confirm"   // pool-run was stopped and runs again: renew, then resume
	opFailed    = "failed"    // the work could not be started (Why)
)

// Why the work ended, in an opExited message, when it did not end by itself.
const (
	whyDeadline   = "deadline"   // no renewal came in time: the lease may lapse
	whyStopped    = "stopped"    // pool-run asked (a loss, a signal, a timeout)
	whyTerminated = "terminated" // the guardian itself got SIGTERM
)

type guardMsg struct {
	Op     string      `json:"op"`
	Start  *guardStart `json:"start,omitempty"`
	Phase  *guardPhase `json:"phase,omitempty"`
	Until  int64       `json:"until,omitempty"` // ns on bootClock
	Sig    int         `json:"sig,omitempty"`
	Grace  int64       `json:"grace,omitempty"` // ns
	Pid    int         `json:"pid,omitempty"`
	Status int         `json:"status,omitempty"`
	Why    string      `json:"why,omitempty"`
	Left   int         `json:"left,omitempty"` // processes the work left behind
	// Internal marks an opFailed that is the run's own failure (a process
	// limit, the cgroup), not the command's: exit 3, not 126.
	Internal bool `json:"internal,omitempty"`
	// Escaped counts the processes that left the run's cgroup, ended
	// through the process tree instead.
	Escaped int `json:"escaped,omitempty"`
}

// guardStart is what the guardian needs to run and to clean up.
type guardStart struct {
	// Path, Argv, Env and Dir are the command; empty Path for a gate,
	// whose phases come one by one.
	Path string   `json:"path,omitempty"`
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	// Ctty, when at least 0, is the work's descriptor of its own
	// pseudo-terminal: it leads a session whose controlling terminal that
	// is. Otherwise it runs in a process group of its own.
	Ctty int `json:"ctty"`
	// Parent is pool-run's pid, Pgrp its process group (the terminal's
	// foreground while pool-run has it).
	Parent int `json:"parent"`
	Pgrp   int `json:"pgrp"`
	// Until is when the lease stops being safely held (bootClock ns),
	// Margin how long before it the work is killed, Grace the SIGTERM to
	// SIGKILL time of a stop, WatchGrace the same for a stop the guardian
	// starts before Until on its own.
	Until      int64 `json:"until"`
	Margin     int64 `json:"margin"`
	Grace      int64 `json:"grace"`
	WatchGrace int64 `json:"watchGrace"`
	// Termios is the terminal's mode before pool-run changed it, restored
	// on the terminal (descriptor 5) if pool-run dies.
	Termios *unix.Termios `json:"termios,omitempty"`
	// Release gives the lease back if pool-run dies.
	Release *guardRelease `json:"release,omitempty"`
	// Phases says the work is a gate's phases: they come as opPhase.
	Phases bool `json:"phases,omitempty"`
	// Inherited are the descriptors from 3 up that pool-run inherited and
	// passed on to the guardian in place, for the work.
	Inherited []int `json:"inherited,omitempty"`
	// Cgroup is the run's cgroup directory, whose descriptor the guardian
	// gets after the terminal's; "" when the work is the process tree
	// alone.
	Cgroup string `json:"cgroup,omitempty"`
}

// guardRelease is the lease to release when pool-run cannot.
type guardRelease struct {
	Store        string `json:"store"`
	OwnerPattern string `json:"ownerPattern,omitempty"`
	Kind         string `json:"kind"`
	Owner        string `json:"owner"`
	Token        string `json:"token"`
}

// guardPhase is one gate phase: shell text for the interpreter.
type guardPhase struct {
	Script string   `json:"script"`
	Dir    string   `json:"dir"`
	Env    []string `json:"env"`
	Grace  int64    `json:"grace"`
}

// conn is one end of the socket pair.
type conn struct {
	mu  sync.Mutex
	w   io.Writer
	enc *json.Encoder
	dec *json.Decoder
	f   *os.File
	r   *rightsReader
}

func newConn(f *os.File) *conn {
	r := &rightsReader{fd: int(f.Fd())}
	return &conn{f: f, w: f, enc: json.NewEncoder(f), dec: json.NewDecoder(r), r: r}
}

// sendFiles sends m with the descriptors fds (SCM_RIGHTS) on its first
// byte; the other end finds them with files once it has read m.
func (c *conn) sendFiles(m guardMsg, fds []int) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int
	for {
		n, err = unix.SendmsgN(c.r.fd, data, unix.UnixRights(fds...), nil, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return err
	}
	if n < len(data) {
		_, err = c.w.Write(data[n:])
	}
	return err
}

// shut ends the connection both ways and closes it: the other end reads
// EOF, and so does this end's reader, which a close alone would leave
// blocked in recvmsg, holding the socket open.
func (c *conn) shut() {
	_ = unix.Shutdown(c.r.fd, unix.SHUT_RDWR)
	_ = c.f.Close()
}

// files takes the descriptors received so far, in order (close-on-exec).
func (c *conn) files() []int {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	fds := c.r.fds
	c.r.fds = nil
	return fds
}

// rightsReader reads the socket with recvmsg, keeping the descriptors
// that come with the bytes.
type rightsReader struct {
	fd  int
	mu  sync.Mutex
	fds []int
	oob [128]byte // room for 16 descriptors, more than a start carries
}

func (r *rightsReader) Read(p []byte) (int, error) {
	for {
		n, oobn, _, _, err := unix.Recvmsg(r.fd, p, r.oob[:], recvFlags)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if oobn > 0 {
			r.keep(r.oob[:oobn])
		}
		if n == 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

func (r *rightsReader) keep(oob []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		if fds, err := unix.ParseUnixRights(&m); err == nil {
			for _, fd := range fds {
				unix.CloseOnExec(fd) // where recvFlags could not say so
			}
			r.fds = append(r.fds, fds...)
		}
	}
}

func (c *conn) send(m guardMsg) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.enc.Encode(m)
}

// recv delivers the messages read until EOF or an error, then closes the
// channel.
func (c *conn) recv() <-chan guardMsg {
	ch := make(chan guardMsg, 16)
	go func() {
		defer close(ch)
		for {
			var m guardMsg
			if err := c.dec.Decode(&m); err != nil {
				return
			}
			ch <- m
		}
	}()
	return ch
}

// bootNow is the time on bootClock, in ns.
func bootNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(bootClock, &ts); err != nil {
		return time.Now().UnixNano() // not reached on the systems built for
	}
	return ts.Nano()
}

// onBootClock turns a time of this process's clock into bootClock ns.
func onBootClock(t time.Time) int64 {
	return bootNow() + int64(time.Until(t))
}
