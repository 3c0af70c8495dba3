package dirstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/durable-lease/durable-lease/internal/sys/jsonfast"
	"github.com/durable-lease/durable-lease/internal/sys/storefile"
	"github.com/durable-lease/durable-lease/lease"
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

func (b *Backend) fencePath(kind string) string {
	return filepath.Join(b.dir, ".fence-"+kind)
}

func decodeFence(data []byte) (fenceMark, bool) {
	if m, ok := decodeFenceFast(data); ok {
		return m, m.Fence > 0
	}
	var m fenceMark
	if err := json.Unmarshal(data, &m); err != nil || m.Fence <= 0 {
		return fenceMark{}, false
	}
	return m, true
}

// readFence returns the stored mark of kind: the greater of the attribute
// and the file, either of which may be missing. A counter that is there
// but cannot be read (an attribute too large, a value that is not a mark,
// an I/O error) is an error,
// not a missing one: starting again from 1 would hand out fences lower
// than ones already given, which is exactly what fences must never do.
func (b *Backend) readFence(kind string) (fenceMark, error) {
	var best fenceMark
	data, err := getFenceAttr(b.dir, fenceAttrPrefix+kind)
	switch {
	case err == nil:
		m, ok := decodeFence(data)
		if !ok {
			return fenceMark{}, fmt.Errorf("lease: the fence counter of %s (attribute %s of the store) is not a counter", kind, fenceAttrPrefix+kind)
		}
		best = m
	case !attrAbsent(err):
		return fenceMark{}, fmt.Errorf("lease: read the fence counter of %s: %w", kind, err)
	}
	data, err = storefile.Read(b.fencePath(kind), maxFenceBytes)
	switch {
	case err == nil:
		m, ok := decodeFence(data)
		if !ok {
			return fenceMark{}, fmt.Errorf("lease: the fence counter of %s (%s) is not a counter", kind, b.fencePath(kind))
		}
		if m.Fence > best.Fence {
			best = m
		}
	case errors.Is(err, storefile.ErrTooLarge):
		// Not read: it may hold the counter, and taking it for a missing
		// one would count again from the record's fence.
		return fenceMark{}, fmt.Errorf("lease: the fence counter of %s (%s) was not read: %w; "+
			"the acquisition is refused, since counting again could hand out a fence lower than one already given",
			kind, b.fencePath(kind), errors.Unwrap(err))
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, storefile.ErrNotRegular):
		// Missing, or something this tool never writes (a symlink, a
		// FIFO, a directory): not a counter, never followed, and replaced
		// by rename at the next acquisition.
	default:
		return fenceMark{}, fmt.Errorf("lease: read the fence counter of %s: %w", kind, err)
	}
	return best, nil
}

// nextFence stores and returns the fence for a new incarnation of kind with
// token, inside kind's critical section, before its record is written: a
// crash in between wastes a number and never reuses one. floor is the
// fence of the record being replaced, if it had one.
func (b *Backend) nextFence(kind, token string, floor int64) (int64, error) {
	stored, err := b.readFence(kind)
	if err != nil {
		return 0, err
	}
	n := max(stored.Fence, floor)
	if n == math.MaxInt64 {
		return 0, fmt.Errorf("%w: %s", ErrFenceExhausted, kind)
	}
	n++
	data := fenceMark{Fence: n, Token: fenceToken(token)}.marshal()
	if err := setFenceAttr(b.dir, fenceAttrPrefix+kind, data); err == nil {
		return n, nil
	}
	if err := storefile.Replace(b.fencePath(kind), ".tmp-"+kind+"-"+lease.RandomHex(8), data, b.perm()); err != nil {
		return 0, fmt.Errorf("lease: store the fence of %s: %w", kind, err)
	}
	return n, nil
}

// marshal is json.Marshal(m), without reflection.
func (m fenceMark) marshal() []byte {
	b := make([]byte, 0, 64)
	b = append(b, `{"f":`...)
	b = strconv.AppendInt(b, m.Fence, 10)
	b = append(b, `,"t":`...)
	b = jsonfast.AppendString(b, m.Token, true)
	return append(b, '}')
}

// decodeFenceFast reads a mark in the exact form this package writes,
// {"f":N,"t":"<hex>"}, as json.Unmarshal would; ok is false for anything
// else, which decodeFence then gives to json.Unmarshal.
func decodeFenceFast(data []byte) (m fenceMark, ok bool) {
	s := string(data)
	rest, found := strings.CutPrefix(s, `{"f":`)
	if !found {
		return m, false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || rest[0] == '0' {
		return m, false
	}
	n, err := strconv.ParseInt(rest[:i], 10, 64)
	if err != nil {
		return m, false
	}
	rest, found = strings.CutPrefix(rest[i:], `,"t":"`)
	if !found {
		return m, false
	}
	j := 0
	for j < len(rest) && (rest[j] >= '0' && rest[j] <= '9' || rest[j] >= 'a' && rest[j] <= 'f') {
		j++
	}
	if rest[j:] != `"}` {
		return m, false
	}
	return fenceMark{Fence: n, Token: rest[:j]}, true
}

// attachFence sets rec.Fence when the stored mark names rec's token.
func (b *Backend) attachFence(rec *lease.Record) {
	if rec == nil || rec.Corrupt || rec.Token == "" {
		return
	}
	if m, err := b.readFence(rec.Kind); err == nil && m.Fence > 0 && m.Token == fenceToken(rec.Token) {
		rec.Fence = m.Fence
	}
}

// fenceToken is the token's fingerprint without its "sha256:" prefix.
func fenceToken(token string) string {
	return strings.TrimPrefix(lease.TokenFingerprint(token), "sha256:")
}
