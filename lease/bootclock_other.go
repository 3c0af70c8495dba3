//go:build !linux

package lease

// Boot reports no boot clock: off Linux the store judges by the wall clock
// alone, as the Node tool does.
func (WallClock) Boot() (BootStamp, bool) { return BootStamp{}, false }
