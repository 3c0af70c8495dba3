package gitstore

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// tip is one ref as read: its commit ("" when absent), the record (nil for
// none or a tombstone) and the kind's fence.
type tip struct {
	sha    string
	rec    *lease.Record
	fence  int64
	srv    serverTime // what the read learned of the server's clock
	holder time.Time  // until when the holder may count on rec (judge)
	err    error      // the ref is not a commit
}

// load reads kind's tip, and with journal also the journal's tip commit
// (in the same fetch: a release or a takeover writes both).
func (b *Backend) load(ctx context.Context, kind string, journal bool) (tip, string, error) {
	tips, jtip, err := b.loadAll(ctx, []string{kind}, journal)
	if err != nil {
		return tip{}, "", err
	}
	return tips[0], jtip, tips[0].err
}

// loadAll reads the tips of kinds (sha "" for a kind without a ref) and
// with journal the journal's tip commit ("" for none), with one fetch and
// one git cat-file.
func (b *Backend) loadAll(ctx context.Context, kinds []string, journal bool) ([]tip, string, error) {
	var refs []string
	for _, k := range kinds {
		refs = append(refs, b.leaseRef(k))
	}
	if journal {
		refs = append(refs, b.JournalRef())
	}
	b.fetchMu.Lock()
	defer b.fetchMu.Unlock()
	srv := serverTime{at: b.clock.Now()}
	have, date, err := b.fetch(ctx, 1, refs...)
	if err != nil {
		return nil, "", err
	}
	srv.date = date
	// What a tip may hold is capped per entry, so that planted refs
	// cannot fill memory: the tip's own object is never read (its id and
	// type are enough), the small entries are small.
	var qs []query
	for _, r := range refs[:len(kinds)] {
		if have[r] {
			lr := scratchRef(r)
			qs = append(qs, query{lr, 0}, query{lr + ":fence", smallEntry}, query{lr + ":record.json", lease.MaxRecordBytes},
				query{lr + ":released", smallEntry}, query{lr + ":clock", smallEntry})
		}
	}
	if journal && have[b.JournalRef()] {
		qs = append(qs, query{scratchRef(b.JournalRef()), 0})
	}
	var objs []object
	if len(qs) > 0 {
		if objs, err = b.catFile(ctx, qs...); err != nil {
			return nil, "", fmt.Errorf("gitstore: read: %w", err)
		}
	}
	tips := make([]tip, len(kinds))
	for i, k := range kinds {
		tips[i].srv = srv
		if !have[refs[i]] {
			continue
		}
		o := objs[:5]
		objs = objs[5:]
		if o[0].typ != "commit" {
			// A tag, a tree or a blob: no writer of this store put it
			// there. Never free, never taken over.
			tips[i].err = fmt.Errorf("gitstore: %s: the ref %s points to a %s, not a commit: durable-lease did not write it; check it, then delete it (git push <remote> :%s)",
				k, refs[i], o[0].typ, refs[i])
			continue
		}
		tips[i] = b.decodeTip(k, o[0].id, srv, o[1], o[2], o[3], o[4])
	}
	var jtip string
	if journal && have[b.JournalRef()] {
		if objs[0].typ != "commit" {
			// Only a change with an event needs the journal (apply).
			jtip = badJournal
		} else {
			jtip = objs[0].id
		}
	}
	return tips, jtip, nil
}

// badJournal stands for a journal ref that is not a commit.
const badJournal = "!"

// smallEntry caps the fence, released and clock entries of a tip.
const smallEntry = 64

// decodeTip makes the record of the tip commit sha from its tree's
// entries fence, record.json, released and clock. The tip is untrusted:
// anyone who can push may have put it there. An entry larger than its cap
// was never read, and a fence that is missing or not a positive number
// makes the record unknown, so a planted tip can neither exhaust memory
// nor read as free. (It can rewind the fence: a takeover of a tip without
// one starts again at 1, as any writer with push rights could anyway.)
func (b *Backend) decodeTip(kind, sha string, srv serverTime, fence, record, released, clock object) tip {
	t := tip{sha: sha, srv: srv}
	blob := func(o object) bool { return o.typ == "blob" && o.data != nil }
	oversized := false
	for _, o := range []object{fence, record, released, clock} {
		if o.typ != "" && o.data == nil && o.size > 0 {
			oversized = true
		}
	}
	fenceOK := false
	if blob(fence) {
		f, err := strconv.ParseInt(strings.TrimSpace(string(fence.data)), 10, 64)
		if err == nil && f > 0 {
			t.fence, fenceOK = f, true
		}
	}
	if released.typ == "blob" && fenceOK && !oversized {
		return t
	}
	var data []byte
	if fenceOK && !oversized && blob(record) {
		data = record.data
	}
	t.rec = lease.DecodeRecord(kind, data)
	t.rec.Fence = t.fence
	serverStamped := blob(clock) && string(clock.data) == clockServer
	t.rec.Seen, t.holder = b.judge(kind, sha, t.rec, srv, serverStamped)
	return t
}

// tipOf reads ref's tip commit from the remote, "" when it has none.
func (b *Backend) tipOf(ctx context.Context, ref string) (string, error) {
	b.fetchMu.Lock()
	defer b.fetchMu.Unlock()
	have, _, err := b.fetch(ctx, 1, ref)
	if err != nil || !have[ref] {
		return "", err
	}
	objs, err := b.catFile(ctx, query{scratchRef(ref), 0})
	if err != nil {
		return "", fmt.Errorf("gitstore: %s: %w", ref, err)
	}
	return objs[0].id, nil
}

// Read returns kind's record, nil when there is none.
func (b *Backend) Read(ctx context.Context, kind string) (*lease.Record, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	t, _, err := b.load(ctx, kind, false)
	return t.rec, err
}

// Names lists the kinds that have a record (tombstones are no record).
func (b *Backend) Names(ctx context.Context) ([]string, error) {
	prefix := "refs/durable-lease/" + b.loc.Namespace + "/leases/"
	out, err := b.git(ctx, nil, "ls-remote", "--refs", "--", b.loc.Remote, prefix+"*")
	if err != nil {
		return nil, b.unreachable("list", err)
	}
	var names, kinds []string
	for _, line := range strings.Split(string(out), "\n") {
		_, ref, ok := strings.Cut(line, "\t")
		kind, isLease := strings.CutPrefix(ref, prefix)
		switch {
		case !ok || !isLease:
		case checkKind(kind) != nil:
			names = append(names, kind) // planted: listed, never read
		default:
			kinds = append(kinds, kind)
		}
	}
	if len(kinds) > 0 {
		tips, _, err := b.loadAll(ctx, kinds, false)
		if err != nil {
			return nil, err
		}
		for i, t := range tips {
			if t.rec != nil || t.err != nil {
				names = append(names, kinds[i]) // a ref not a commit: listed, never read
			}
		}
	}
	sort.Strings(names)
	return names, nil
}
