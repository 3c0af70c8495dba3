package provision

import "context"

type cgroupKey struct{}

// InCgroup returns a context under which [Run] starts the command's
// programs inside the cgroup whose open directory is fd (Linux, cgroup v2:
// each program's first instruction runs there), so that a holder's
// provision, reset and health commands are contained with its work and
// ended with it. Elsewhere the descriptor is ignored.
func InCgroup(ctx context.Context, fd int) context.Context {
	return context.WithValue(ctx, cgroupKey{}, fd)
}

// cgroupOf is the cgroup descriptor ctx carries, or -1.
func cgroupOf(ctx context.Context) int {
	if fd, ok := ctx.Value(cgroupKey{}).(int); ok && fd >= 0 {
		return fd
	}
	return -1
}
