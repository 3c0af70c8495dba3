package lease

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/durable-lease/durable-lease/internal/storefile"
)

// A fence is a number that only ever grows per kind: every acquisition
// (and takeover) gets the next one, so a protected resource that remembers
// the highest fence it has seen can refuse a holder that lost its lease
// and did not notice (a paused process waking up late). A token cannot do
// that: it says "not the current holder", a fence says "older than one you
// have already seen".
//
// The directory store keeps the counter beside the records, not in them,
// so the records stay byte-for-byte the Node tool's: in an extended
// attribute of the store directory, "user.dlfence.<kind>", or, where the
// filesystem or the directory's owner refuses user attributes or has no
// room left for them, in the file ".fence-<kind>". Its value names the incarnation that got
// the number (by token fingerprint), so a reader shows a record's fence
// only when the record is that incarnation: a record another tool wrote
// over it has no fence. The Node tool ignores both places and never
// lowers the counter, so the counter stays monotonic across its writes
// too. See docs/PROTOCOL.md §2.4.

// fenceMark is the stored counter: the last fence handed out for a kind,
// and the fingerprint of the token it was handed to.
type fenceMark struct {
	Fence int64  `json:"f"`
	Token string `json:"t"`
}

// maxFenceBytes bounds a stored mark.
const maxFenceBytes = 256

// fenceAttrPrefix names the attributes. Names and values are short because
// ext4 keeps all of an inode's attributes in one 4 KiB block: about 60 kinds
// fit, and a kind whose attribute no longer fits (ENOSPC) uses its file.
const fenceAttrPrefix = "user.dlfence."

// ErrFenceExhausted is returned when a kind's counter cannot grow further
// (it was set near the largest int64 by hand).
var ErrFenceExhausted = errors.New("lease: fence counter exhausted")

func (b *fileBackend) fencePath(kind string) string {
	return filepath.Join(b.dir, ".fence-"+kind)
}

func decodeFence(data []byte) (fenceMark, bool) {
	var m fenceMark
	if err := json.Unmarshal(data, &m); err != nil || m.Fence <= 0 {
		return fenceMark{}, false
	}
	return m, true
}

// readFence returns the stored mark of kind: the greater of the attribute
// and the file, either of which may be missing. Unreadable or garbage
// values count as missing.
func (b *fileBackend) readFence(kind string) fenceMark {
	var best fenceMark
	if data, err := getFenceAttr(b.dir, fenceAttrPrefix+kind); err == nil {
		if m, ok := decodeFence(data); ok {
			best = m
		}
	}
	if data, err := storefile.Read(b.fencePath(kind), maxFenceBytes); err == nil {
		if m, ok := decodeFence(data); ok && m.Fence > best.Fence {
			best = m
		}
	}
	return best
}

// nextFence stores and returns the fence for a new incarnation of kind with
// token, inside kind's critical section, before its record is written: a
// crash in between wastes a number and never reuses one. floor is the
// fence of the record being replaced, if it had one.
func (b *fileBackend) nextFence(kind, token string, floor int64) (int64, error) {
	n := max(b.readFence(kind).Fence, floor)
	if n == math.MaxInt64 {
		return 0, fmt.Errorf("%w: %s", ErrFenceExhausted, kind)
	}
	n++
	data, _ := json.Marshal(fenceMark{Fence: n, Token: fenceToken(token)})
	err := setFenceAttr(b.dir, fenceAttrPrefix+kind, data)
	if err == nil {
		return n, nil
	}
	if err := storefile.Replace(b.fencePath(kind), ".tmp-"+kind+"-"+randomHex(8), data); err != nil {
		return 0, fmt.Errorf("lease: store the fence of %s: %w", kind, err)
	}
	return n, nil
}

// attachFence sets rec.Fence when the stored mark names rec's token.
func (b *fileBackend) attachFence(rec *Record) {
	if rec == nil || rec.Corrupt || rec.Token == "" {
		return
	}
	if m := b.readFence(rec.Kind); m.Fence > 0 && m.Token == fenceToken(rec.Token) {
		rec.Fence = m.Fence
	}
}

// fenceToken is the token's fingerprint without its "sha256:" prefix.
func fenceToken(token string) string { return strings.TrimPrefix(TokenFingerprint(token), "sha256:") }
