//go:build !linux

package cgroup

import (
	"context"
	"syscall"
	"time"
)

// Mount fails: there is no cgroup v2 off Linux.
func Mount() (string, error) { return "", ErrUnsupported }

// Own fails: there is no cgroup v2 off Linux.
func Own() (string, error) { return "", ErrUnsupported }

// Of is "": there is no cgroup v2 off Linux.
func Of(int) string { return "" }

// DirOf fails: there is no cgroup v2 off Linux.
func DirOf(string) (string, error) { return "", ErrUnsupported }

// Writable is false: there is no cgroup v2 off Linux.
func Writable(string) bool { return false }

// Group is never made off Linux.
type Group struct{ ref Ref }

// Create fails: there is no cgroup v2 off Linux.
func Create(string, string) (*Group, error) { return nil, ErrUnsupported }

// FromFD fails: there is no cgroup v2 off Linux.
func FromFD(int, string) (*Group, error) { return nil, ErrUnsupported }

// Open fails: there is no cgroup v2 off Linux.
func Open(Ref) (*Group, error) { return nil, ErrUnsupported }

// OpenDir fails: there is no cgroup v2 off Linux.
func OpenDir(string) (*Group, error) { return nil, ErrUnsupported }

func (g *Group) Sub(string) (*Group, error)       { return nil, ErrUnsupported }
func (g *Group) Bind(string) error                { return ErrUnsupported }
func (g *Group) Binding() string                  { return "" }
func Namespace() uint64                           { return 0 }
func OpenID(uint64) (*Group, error)               { return nil, ErrUnsupported }
func (g *Group) Ref() Ref                         { return g.ref }
func (g *Group) Dir() string                      { return "" }
func (g *Group) FD() int                          { return -1 }
func (g *Group) UID() uint32                      { return 0 }
func (g *Group) Close() error                     { return nil }
func (g *Group) Events() (bool, bool, error)      { return false, false, ErrUnsupported }
func (g *Group) Populated() (bool, error)         { return false, ErrUnsupported }
func (g *Group) Freeze() error                    { return ErrUnsupported }
func (g *Group) Thaw() error                      { return ErrUnsupported }
func (g *Group) Frozen() (bool, error)            { return false, ErrUnsupported }
func (g *Group) WaitFrozen(context.Context) error { return ErrUnsupported }
func (g *Group) Kill() error                      { return ErrUnsupported }
func (g *Group) Signal(syscall.Signal) error      { return ErrUnsupported }
func (g *Group) Procs() ([]int, error)            { return nil, ErrUnsupported }
func (g *Group) WaitEmpty(context.Context) error  { return ErrUnsupported }
func (g *Group) End(time.Duration) error          { return ErrUnsupported }
func (g *Group) Remove() error                    { return ErrUnsupported }
func (g *Group) Gone() bool                       { return false }
func (g *Group) Marked(string) bool               { return false }
func (g *Group) Mark(string) error                { return ErrUnsupported }
func (g *Group) HasPids() bool                    { return false }
func (g *Group) SetPidsMax(int64) error           { return ErrUnsupported }
func PidsLimit(string) (int64, bool)              { return 0, false }
