package inotify

import (
	"encoding/binary"
	"strings"

	"golang.org/x/sys/unix"
)

// Each calls fn for every whole event in buf, in order, with its watch
// descriptor, its mask and its name without the NUL padding ("" for an
// event on the watched directory itself), until fn returns false. buf is
// what one read of an inotify descriptor returned; an event cut short at
// its end (which the kernel never returns) is not reported.
func Each(buf []byte, fn func(wd int32, mask uint32, name string) bool) {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		// struct inotify_event: int32 wd, uint32 mask, uint32 cookie,
		// uint32 len, then len bytes of name.
		wd := int32(binary.NativeEndian.Uint32(buf[off:]))
		mask := binary.NativeEndian.Uint32(buf[off+4:])
		nameLen := int(binary.NativeEndian.Uint32(buf[off+12:]))
		start := off + unix.SizeofInotifyEvent
		off = start + nameLen
		if nameLen < 0 || off > len(buf) {
			return
		}
		if !fn(wd, mask, strings.TrimRight(string(buf[start:off]), "\x00")) {
			return
		}
	}
}

// BufferSize is a read buffer that holds 64 events of the longest name.
const BufferSize = 64 * (unix.SizeofInotifyEvent + unix.NAME_MAX + 1)
