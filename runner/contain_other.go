//go:build !linux

package runner

import "github.com/durable-lease/durable-lease/internal/sys/cgroup"

func selfStart() (uint64, error)    { return 0, cgroup.ErrUnsupported }
func processLives(int, uint64) bool { return true }
func canStartInto(string) error     { return cgroup.ErrUnsupported }
