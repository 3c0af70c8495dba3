//go:build !linux

package lease

// Off Linux there are no cgroups to end: the guardian and the fence are
// the answer there.
func defaultEnder() workEnder { return nil }

func hostBootID() string { return "" }
