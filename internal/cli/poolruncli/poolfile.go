package poolruncli

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
)

// PoolFileName is the project's pool file, which pool-run takes when
// nothing else names what to hold: looked for in the working directory
// and each directory above it up to the top of its git working tree (the
// working directory alone outside git), as lefthook finds lefthook.yml. A
// name no other tool uses.
const PoolFileName = "durable-lease-pool.json"

// findPoolFile returns the nearest [PoolFileName] from cwd up to the top
// of its git working tree, or "" if there is none. The file's provision,
// reset and health commands run as the user, so one found this way must
// be theirs (or root's) and writable by nobody else, as must a symbolic
// link at its name: a file another user could have put in a directory on
// the way (a sticky /tmp) is refused, not run. A name that is not a
// regular file (a directory, a FIFO) is refused too.
func findPoolFile(cwd string) (string, error) {
	top := dirstore.WorktreeTop(cwd)
	if top == "" {
		top = cwd
	}
	for d := cwd; ; d = filepath.Dir(d) {
		p := filepath.Join(d, PoolFileName)
		var st unix.Stat_t
		err := unix.Lstat(p, &st)
		switch {
		case errors.Is(err, unix.ENOENT):
		case err != nil:
			return "", cliparse.Usagef("%s: %v", p, err)
		default:
			if err := ownPoolFile(p, &st); err != nil {
				return "", err
			}
			return p, nil
		}
		if d == top || filepath.Dir(d) == d {
			return "", nil
		}
	}
}

// ownPoolFile checks the found pool file p (lstat st): a link and its
// target of the user's or root's, a regular file nobody else can write.
func ownPoolFile(p string, st *unix.Stat_t) error {
	me := uint32(unix.Geteuid())
	refuse := func(why string) error {
		return cliparse.Usagef("%s, found from the working directory, %s: its commands would run as you. Pass --pool FILE, or remove it if you did not put it there", p, why)
	}
	if st.Uid != me && st.Uid != 0 {
		return refuse(fmt.Sprintf("belongs to uid %d (you are uid %d)", st.Uid, me))
	}
	if uint32(st.Mode)&unix.S_IFMT == unix.S_IFLNK {
		if err := unix.Stat(p, st); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return refuse("is a symbolic link to nothing")
			}
			return cliparse.Usagef("%s: %v", p, err)
		}
		if st.Uid != me && st.Uid != 0 {
			return refuse(fmt.Sprintf("is a link to a file of uid %d's (you are uid %d)", st.Uid, me))
		}
	}
	switch {
	case uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG:
		return refuse("is not a regular file")
	case st.Mode&0o002 != 0:
		return refuse(fmt.Sprintf("is writable by every user (mode %04o)", st.Mode&0o7777))
	}
	return nil
}
