package inotify

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestEachReadsTheKernelsEvents: events a real inotify descriptor reads
// for a file made, renamed and removed come out whole and in order, names
// without their padding, and fn's false stops the walk.
func TestEachReadsTheKernelsEvents(t *testing.T) {
	dir := t.TempDir()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	wd, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_DELETE)
	if err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "a-much-longer-name-than-sixteen-bytes.json")
	if err := os.WriteFile(a, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, BufferSize)
	var got []string
	for len(got) < 3 {
		n, err := unix.Read(fd, buf)
		if err != nil {
			t.Fatal(err)
		}
		Each(buf[:n], func(w int32, mask uint32, name string) bool {
			if w != int32(wd) {
				t.Errorf("event of watch %d, want %d", w, wd)
			}
			switch {
			case mask&unix.IN_CREATE != 0:
				got = append(got, "create "+name)
			case mask&unix.IN_MOVED_TO != 0:
				got = append(got, "moved "+name)
			case mask&unix.IN_DELETE != 0:
				got = append(got, "delete "+name)
			}
			return true
		})
	}
	want := []string{"create a.json", "moved " + filepath.Base(b), "delete " + filepath.Base(b)}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}

	// Two events in one buffer: false after the first stops the walk; a
	// buffer cut inside the second's name reports the first alone.
	two := append(event(1, unix.IN_CREATE, "x"), event(2, unix.IN_DELETE, "y")...)
	var seen []int32
	Each(two, func(w int32, _ uint32, _ string) bool { seen = append(seen, w); return false })
	if !slices.Equal(seen, []int32{1}) {
		t.Errorf("false after the first event: saw watches %v", seen)
	}
	seen = nil
	Each(two[:len(two)-1], func(w int32, _ uint32, _ string) bool { seen = append(seen, w); return true })
	if !slices.Equal(seen, []int32{1}) {
		t.Errorf("a cut buffer: saw watches %v, want the whole first event only", seen)
	}
}

// event encodes one struct inotify_event, its name padded to 16 bytes.
func event(wd int32, mask uint32, name string) []byte {
	b := make([]byte, unix.SizeofInotifyEvent+16)
	binary.NativeEndian.PutUint32(b, uint32(wd))
	binary.NativeEndian.PutUint32(b[4:], mask)
	binary.NativeEndian.PutUint32(b[12:], 16)
	copy(b[unix.SizeofInotifyEvent:], name)
	return b
}
