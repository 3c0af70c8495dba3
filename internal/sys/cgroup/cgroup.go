package cgroup

import (
	"errors"
	"fmt"
	"strings"
)

// Errors; match them with errors.Is.
var (
	// ErrUnsupported reports a system without a cgroup v2 hierarchy (or
	// not Linux).
	ErrUnsupported = errors.New("cgroup: no cgroup v2 hierarchy on this system")
	// ErrNotFound reports a cgroup that is not there, or is another one
	// than the one named (its id differs: removed and made again).
	ErrNotFound = errors.New("cgroup: no such cgroup")
	// ErrDenied reports a cgroup this user may not create, change or end.
	ErrDenied = errors.New("cgroup: permission denied")
	// ErrSurvived reports processes still in a cgroup after a kill and
	// the wait that follows it (a process in uninterruptible sleep).
	ErrSurvived = errors.New("cgroup: processes survived the kill")
)

// EndedMark is the cgroup that whoever ends a run's cgroup from outside
// (a successor taking the lease) makes below it before the kill, so that
// the run's own processes, seeing the work die, can tell that it was
// ended for them rather than ending by itself.
const EndedMark = "ended-for-successor"

// Ref names one cgroup on one host: its path in the v2 hierarchy (as
// /proc/PID/cgroup shows it, "/" first) and its id (the inode number of
// its directory), which a cgroup made again at the same path does not
// share.
type Ref struct {
	Path string
	ID   uint64
}

func (r Ref) String() string { return fmt.Sprintf("%s (id %d)", r.Path, r.ID) }

// ValidName reports whether name may name a cgroup this package makes: a
// single path component of at most 200 bytes of letters, digits, '.',
// '_' and '-', not starting with '.' and not a core file's "cgroup."
// prefix.
func ValidName(name string) bool {
	if name == "" || len(name) > 200 || name[0] == '.' || strings.HasPrefix(name, "cgroup.") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// parseEvents reads cgroup.events: "populated 0|1" and "frozen 0|1".
func parseEvents(data []byte) (populated, frozen bool, err error) {
	seen := 0
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		switch k {
		case "populated":
			populated, seen = v == "1", seen|1
		case "frozen":
			frozen, seen = v == "1", seen|2
		}
	}
	if seen&1 == 0 {
		return false, false, fmt.Errorf("cgroup: cgroup.events has no populated line: %q", data)
	}
	return populated, frozen, nil
}

// ownPath is the v2 cgroup of a process from the text of /proc/PID/cgroup:
// its "0::" line.
func ownPath(data []byte) (string, error) {
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			if !strings.HasPrefix(p, "/") {
				return "", fmt.Errorf("%w: cgroup path %q", ErrUnsupported, p)
			}
			return p, nil
		}
	}
	return "", fmt.Errorf("%w (no 0:: line in /proc/self/cgroup)", ErrUnsupported)
}

// mountPoint is the mount point of the cgroup v2 hierarchy in the text of
// /proc/self/mountinfo: the first mount of type cgroup2 whose root is the
// hierarchy's (or the cgroup namespace's) root. Fields: ID parent dev
// root mountpoint options [optional...] - fstype source superoptions.
func mountPoint(data []byte) (string, error) {
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+1 >= len(f) || f[sep+1] != "cgroup2" || f[3] != "/" {
			continue
		}
		return unescapeMount(f[4]), nil
	}
	return "", ErrUnsupported
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
