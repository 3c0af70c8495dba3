package gitstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// The patience rule counts from the first time this host saw a tip, and
// from the send time of this host's own confirmed writes. Every CLI call
// is a process of its own, so those moments are kept in a file per store
// under the user's cache directory (the state directory), shared by every
// process of the user on the host, read and updated under a lock. A lost
// or unreadable file only makes patience start again: a takeover comes
// later, never sooner.

// stamp is a reading of the host's clock that another process can
// compare with its own: the boot clock where there is one (epoch names
// the boot; it runs through suspend and setting the date does not move
// it), else the wall clock (epoch "wall:" and the host's name, so that a
// cache directory shared between hosts never mixes their readings). The
// wall clock can be set forward, which makes a watch look longer than it
// was: where there is no boot clock the patience rule rests on nobody
// setting the date forward by more than the margin.
type stamp struct {
	Epoch string `json:"epoch"`
	Ns    int64  `json:"ns"`
}

// sighting is what the host knows of one kind's tip.
type sighting struct {
	Tip  string `json:"tip"`
	Seen stamp  `json:"seen"`           // the first time the host saw Tip
	Sent *stamp `json:"sent,omitempty"` // the send time of the host's own write of Tip
}

// observationsFile is the state file: one sighting per kind, the current
// tip only (a ref only moves forward, so an older tip is never the tip
// again).
type observationsFile struct {
	Store string              `json:"store"`
	Kinds map[string]sighting `json:"kinds"`
}

// maxStateBytes bounds the state file read: one small entry per kind.
const maxStateBytes = 4 << 20

// observations keeps the sightings of one store, in the state file when
// path is set, in memory otherwise.
type observations struct {
	store string
	path  string // the state file; "" for memory only
	clock lease.Clock

	mu  sync.Mutex
	mem map[string]sighting
}

// stateFile is the state file of store in dir.
func stateFile(dir, store string) string {
	sum := sha256.Sum256([]byte(store))
	return filepath.Join(dir, hex.EncodeToString(sum[:16])+".json")
}

// DefaultStateDir is where the sightings are kept unless [Options.StateDir]
// says otherwise: durable-lease/gitstore under the user's cache directory
// ($XDG_CACHE_HOME or ~/.cache on Linux).
func DefaultStateDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "durable-lease", "gitstore"), nil
}

func (o *observations) now() stamp {
	if bc, ok := o.clock.(lease.BootClock); ok {
		if b, ok := bc.Boot(); ok {
			return stamp{Epoch: "boot:" + b.ID, Ns: b.Ms * int64(time.Millisecond)}
		}
	}
	return stamp{Epoch: wallEpoch, Ns: o.clock.Now().UnixNano()}
}

// wallEpoch is the epoch of wall-clock stamps on this host.
var wallEpoch = func() string {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "unknown"
	}
	return "wall:" + name
}()

// since is how long ago s was, by now; ok is false when s is of another
// boot or clock, or in the future (the wall clock was set back), and
// cannot be compared.
func since(s, now stamp) (time.Duration, bool) {
	if s.Epoch != now.Epoch || s.Ns > now.Ns {
		return 0, false
	}
	return time.Duration(now.Ns - s.Ns), true
}

// observe records that kind's tip is sha (first sighting now unless
// known) and returns how long ago the host first saw it and, for its own
// write, how long ago that was sent.
func (o *observations) observe(kind, sha string) (seenAgo time.Duration, sentAgo time.Duration, own bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	o.update(func(kinds map[string]sighting) bool {
		s, ok := kinds[kind]
		if ok && s.Tip == sha {
			if d, ok := since(s.Seen, now); ok {
				seenAgo = d
				if s.Sent != nil {
					sentAgo, own = since(*s.Sent, now)
				}
				return false
			}
		}
		// A new tip, or a sighting this clock cannot compare: patience
		// starts now.
		kinds[kind] = sighting{Tip: sha, Seen: now}
		return true
	})
	return seenAgo, sentAgo, own
}

// confirm records that the host's write of sha, sent at sent, is kind's
// tip.
func (o *observations) confirm(kind, sha string, sent stamp) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	o.update(func(kinds map[string]sighting) bool {
		kinds[kind] = sighting{Tip: sha, Seen: now, Sent: &sent}
		return true
	})
}

// update runs fn on the sightings and keeps them if fn says they
// changed. With a state file it holds the file's lock throughout; a
// state file that cannot be used leaves the sightings to memory for this
// call, which only makes patience start again.
func (o *observations) update(fn func(map[string]sighting) bool) {
	if o.path != "" {
		err := o.updateFile(fn)
		if err == nil {
			return
		}
	}
	if o.mem == nil {
		o.mem = map[string]sighting{}
	}
	fn(o.mem)
}

// decodeState parses a state file; a file of another store or one that
// does not parse counts as empty.
func decodeState(data []byte, store string) map[string]sighting {
	var f observationsFile
	if err := json.Unmarshal(data, &f); err != nil || f.Store != store || f.Kinds == nil {
		return map[string]sighting{}
	}
	return f.Kinds
}

func encodeState(store string, kinds map[string]sighting) ([]byte, error) {
	return json.Marshal(observationsFile{Store: store, Kinds: kinds})
}

// errStateDir reports a state directory this tool will not trust.
var errStateDir = errors.New("gitstore: state directory not private")

// checkStateDir creates dir (0700) if needed and makes sure it is a
// directory of this user that no one else can write to.
func checkStateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 || !ownedByMe(fi) {
		return fmt.Errorf("%w: %s", errStateDir, dir)
	}
	return nil
}
