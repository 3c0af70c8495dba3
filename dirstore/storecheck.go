package dirstore

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/internal/sys/storefile"
)

// ErrUnsafeStore reports a store directory that another user could
// change: owned by someone else, or writable by others without being a
// deliberate group store. Nothing was read or written.
var ErrUnsafeStore = errors.New("lease: unsafe store")

// A store directory is trusted as git trusts a repository (safe.directory),
// tmux its socket directory and OpenSSH's StrictModes a home: see
// docs/PROTOCOL.md §1.1. The rule, on the directory itself (after
// symbolic links):
//
//   - its owner is the effective user, or root;
//   - it is not writable by every user (not even with the sticky bit: a
//     stranger could create a lease nobody holds yet);
//   - if it is writable by its group, it is either a group store (mode
//     2770 or narrower: the set-group-ID bit set, and the user a member of
//     its group, or root), or the group is the owner's private group (no
//     other user has it, as a umask of 002 makes on Debian and Ubuntu).
//
// A missing store is not judged: it is created 0700 by its first
// mutation, and judged then if someone else made it first.

// checkStoreDir judges the store directory dir and returns the
// permissions of what the store creates in it: storefile.Group for a
// group store, else storefile.Private. exists is false for a missing
// store (judged when it is made).
func checkStoreDir(dir string) (perm storefile.Perm, exists bool, err error) {
	var st unix.Stat_t
	// A symbolic link at the store's path is followed only if it is the
	// user's or root's: one another user planted (in a sticky /tmp, say)
	// could be pointed elsewhere between the check and every later use.
	if err := unix.Lstat(dir, &st); err == nil && uint32(st.Mode)&unix.S_IFMT == unix.S_IFLNK {
		if me := uint32(unix.Geteuid()); st.Uid != me && st.Uid != 0 {
			db := readAccounts("/etc/passwd", "/etc/group")
			return storefile.Private, true, fmt.Errorf("%w: %s is a symbolic link of another user's (%s; you are %s), who could point it at another directory at any moment. To fix it, name the directory it points to, or remove the link if it was planted",
				ErrUnsafeStore, dir, db.user(st.Uid), db.user(me))
		}
	}
	if err := unix.Stat(dir, &st); err != nil {
		// Missing, or not reachable as a directory: the operations say
		// what is wrong (a store that is a file, a parent it cannot
		// enter) as they always have.
		return storefile.Private, false, nil
	}
	if uint32(st.Mode)&unix.S_IFMT != unix.S_IFDIR {
		return storefile.Private, false, nil
	}
	if uint32(st.Mode)&0o020 != 0 && hasAccessACL(dir) {
		// The group bits are an ACL's mask: users the ACL names may write
		// too, whatever the group's members.
		return storefile.Private, true, fmt.Errorf("%w: %s (mode %04o) has an access ACL whose mask lets users it names write it. To fix it, setfacl -b %s and chmod 700 (a store of your own) or 2770 (a group store)",
			ErrUnsafeStore, dir, uint32(st.Mode)&0o7777, dir)
	}
	return judgeStoreDir(dir, st.Uid, st.Gid, uint32(st.Mode)&0o7777, identity{})
}

// hasAccessACL reports whether dir carries a POSIX access ACL.
func hasAccessACL(dir string) bool {
	n, err := unix.Getxattr(dir, "system.posix_acl_access", nil)
	return err == nil && n > 0
}

// identity is who the process is, for judging a store; zero fields are
// read from the process (tests set them).
type identity struct {
	euid   *uint32
	groups func(gid uint32) bool
	db     *accountDB
}

func (id identity) uid() uint32 {
	if id.euid != nil {
		return *id.euid
	}
	return uint32(unix.Geteuid())
}

func (id identity) inGroup(gid uint32) bool {
	if id.groups != nil {
		return id.groups(gid)
	}
	if uint32(unix.Getegid()) == gid {
		return true
	}
	gs, err := unix.Getgroups()
	if err != nil {
		return false
	}
	for _, g := range gs {
		if uint32(g) == gid {
			return true
		}
	}
	return false
}

func (id identity) accounts() *accountDB {
	if id.db != nil {
		return id.db
	}
	return readAccounts("/etc/passwd", "/etc/group")
}

// judgeStoreDir is checkStoreDir's rule on a directory's owner, group and
// mode (permission bits and set-id bits).
func judgeStoreDir(dir string, uid, gid, mode uint32, id identity) (storefile.Perm, bool, error) {
	me := id.uid()
	var db *accountDB
	accounts := func() *accountDB {
		if db == nil {
			db = id.accounts()
		}
		return db
	}
	unsafe := func(why, fix string) (storefile.Perm, bool, error) {
		return storefile.Private, true, fmt.Errorf("%w: %s (owner %s, group %s, mode %04o) %s. To fix it, %s",
			ErrUnsafeStore, dir, accounts().user(uid), accounts().group(gid), mode, why, fix)
	}
	if uid != me && uid != 0 {
		return unsafe(fmt.Sprintf("belongs to another user (you are %s): its owner could read every token and rewrite every lease", accounts().user(me)),
			"use a store of your own (another --store or LEASE_STORE, or remove this directory if it was planted), "+
				"or have root make it a group store (see docs/CLI.md, \"Stores and who may use them\")")
	}
	if mode&0o002 != 0 {
		return unsafe("is writable by every user",
			fmt.Sprintf("chmod 700 %s for a store of your own, or make it a group store (chmod 2770, see docs/CLI.md, \"Stores and who may use them\")", dir))
	}
	if mode&0o020 == 0 {
		return storefile.Private, true, nil
	}
	if mode&unix.S_ISGID != 0 && (me == 0 || id.inGroup(gid)) {
		return storefile.Group, true, nil
	}
	if accounts().privateGroup(gid, uid) {
		return storefile.Private, true, nil // umask 002 with user private groups
	}
	if mode&unix.S_ISGID != 0 {
		return unsafe("is a group store of a group you are not in", "use a store of your own, or ask for membership of the group")
	}
	return unsafe("is writable by its group without being a group store",
		fmt.Sprintf("chmod 700 %s for a store of your own, or chmod 2770 %s for a group store (see docs/CLI.md, \"Stores and who may use them\")", dir, dir))
}

// accountDB is what the store check needs of /etc/passwd and /etc/group:
// names for the error, and which users have a group. It is read only when
// a store is refused or group-writable.
type accountDB struct {
	users   map[uint32]string
	primary map[uint32][]uint32 // gid → uids with it as primary group
	groups  map[uint32]string
	members map[uint32][]string // gid → member names
	known   map[uint32]bool     // gids found in the group file
}

// maxAccountBytes bounds each of the account files read.
const maxAccountBytes = 4 << 20

func readAccounts(passwd, group string) *accountDB {
	db := &accountDB{users: map[uint32]string{}, primary: map[uint32][]uint32{},
		groups: map[uint32]string{}, members: map[uint32][]string{}, known: map[uint32]bool{}}
	scan(passwd, func(f []string) {
		if len(f) < 4 {
			return
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return
		}
		if _, ok := db.users[uint32(uid)]; !ok {
			db.users[uint32(uid)] = f[0]
		}
		db.primary[uint32(gid)] = append(db.primary[uint32(gid)], uint32(uid))
	})
	scan(group, func(f []string) {
		if len(f) < 4 {
			return
		}
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			return
		}
		db.known[uint32(gid)] = true
		if _, ok := db.groups[uint32(gid)]; !ok {
			db.groups[uint32(gid)] = f[0]
		}
		for _, m := range strings.Split(f[3], ",") {
			if m = strings.TrimSpace(m); m != "" {
				db.members[uint32(gid)] = append(db.members[uint32(gid)], m)
			}
		}
	})
	return db
}

// scan calls fn with the colon-separated fields of each line of file.
func scan(file string, fn func([]string)) {
	data, err := storefile.ReadUserFile(file, maxAccountBytes)
	if err != nil {
		return
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(nil, maxAccountBytes)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		fn(strings.Split(line, ":"))
	}
}

func (db *accountDB) user(uid uint32) string {
	if n, ok := db.users[uid]; ok {
		return fmt.Sprintf("%s, uid %d", n, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}

func (db *accountDB) group(gid uint32) string {
	if n, ok := db.groups[gid]; ok {
		return fmt.Sprintf("%s, gid %d", n, gid)
	}
	return fmt.Sprintf("gid %d", gid)
}

// privateGroup reports whether group gid is provably owner's alone: listed
// in the group file with no member but the owner, and no other user's
// primary group. A group the files do not list (a directory service) is
// not proven private.
func (db *accountDB) privateGroup(gid, owner uint32) bool {
	if !db.known[gid] {
		return false
	}
	name, ok := db.users[owner]
	if !ok {
		return false
	}
	for _, m := range db.members[gid] {
		if m != name {
			return false
		}
	}
	for _, u := range db.primary[gid] {
		if u != owner {
			return false
		}
	}
	return true
}

// GitIgnoreName is the file that keeps a store made inside a git working
// tree (LEASE_STORE=logs/leases, a pool file's relative "store") out of
// git status and out of commits, with no step of the user's: it ignores
// everything in the directory, itself included. Like every name that
// starts with a dot it is no lease, for this tool and the Node tool.
const GitIgnoreName = ".gitignore"

const gitIgnoreAll = "# Made by durable-lease: a lease store is never committed.\n*\n"

// makeStoreDir creates the store directory dir, mode 0700 whatever the
// umask, with its parents as the umask makes them. If something else made
// it first, it is judged like any store found on disk. A store it makes
// inside a git working tree gets a .gitignore of "*" (see [GitIgnoreName]).
func makeStoreDir(dir string) (storefile.Perm, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o777); err != nil {
		return storefile.Private, err
	}
	err := storefile.Mkdir(dir, storefile.Private)
	if err == nil {
		if WorktreeTop(filepath.Dir(dir)) != "" {
			// Best effort: a store without it works all the same.
			_ = storefile.WriteNew(filepath.Join(dir, GitIgnoreName), []byte(gitIgnoreAll), storefile.Private)
		}
		return storefile.Private, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return storefile.Private, err
	}
	perm, exists, err := checkStoreDir(dir)
	if err == nil && !exists {
		err = fmt.Errorf("%s exists but is not a directory that can be used (%w)", dir, unix.ENOTDIR)
	}
	return perm, err
}
