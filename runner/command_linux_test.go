package runner

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWorkGetsOnlyTheInheritedDescriptors: a descriptor pool-run inherited
// with a gap below it (a `9>log` of the user's) reaches the work in place,
// and nothing else does: the guardian's own descriptors that land in the
// gap after its exec (its runtime's, the directory of the work's cgroup)
// are not passed on as if they were inherited. Not parallel: the
// descriptor would reach the work of every run under way.
func TestWorkGetsOnlyTheInheritedDescriptors(t *testing.T) {
	const high = 40
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if err := unix.Dup3(int(null.Fd()), high, 0); err != nil { // not close-on-exec: inherited
		t.Fatal(err)
	}
	defer unix.Close(high)
	want := []string{"0", "1", "2"} // and what this process inherited from 3 up, high among them
	for _, f := range inheritedFiles() {
		if f != nil {
			want = append(want, strconv.Itoa(int(f.Fd())))
		}
	}
	slices.Sort(want)
	for _, containment := range containments(t) {
		t.Run(containment, func(t *testing.T) {
			s := testStore(t)
			var out lockedBuffer
			o := baton(t, s, &out, nil)
			o.Containment = containment
			if r := Command(context.Background(), o, []string{"ls", "-l", "/proc/self/fd"}); r.Exit != 0 {
				t.Fatalf("%+v: %s", r, out.String())
			}
			var got []string
			for _, line := range strings.Split(out.String(), "\n") {
				f := strings.Fields(line)
				if len(f) < 3 || f[len(f)-2] != "->" {
					continue
				}
				if target := f[len(f)-1]; strings.HasPrefix(target, "/proc/") && strings.HasSuffix(target, "/fd") {
					continue // ls's own, of the directory it lists
				}
				got = append(got, f[len(f)-3])
			}
			slices.Sort(got)
			if !slices.Equal(got, want) || !slices.Contains(got, strconv.Itoa(high)) {
				t.Errorf("the work's descriptors besides ls's own: %v (in %s); want %v: 0, 1, 2 and the inherited ones alone", got, out.String(), want)
			}
			freeAfter(t, s, "b")
		})
	}
}
