//go:build !linux

package procfs

import (
	"errors"
	"fmt"
)

// ErrNoProc reports a system without Linux's /proc.
var ErrNoProc = fmt.Errorf("procfs: no /proc on this system: %w", errors.ErrUnsupported)

// ReadStat fails: this system has no /proc.
func ReadStat(int) (Stat, error) { return Stat{}, ErrNoProc }

// Children is nil: this system has no /proc.
func Children(int) []int { return nil }

// ThreadStats is nil: this system has no /proc.
func ThreadStats(int) []Stat { return nil }

// HasChildrenLists is false: this system has no /proc.
func HasChildrenLists() bool { return false }

// PIDs fails: this system has no /proc.
func PIDs() ([]int, error) { return nil, ErrNoProc }

// OpenFiles is ErrNoProc: there is no /proc.
func OpenFiles(int) ([]string, error) { return nil, ErrNoProc }
