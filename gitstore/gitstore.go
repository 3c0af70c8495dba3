// Package gitstore keeps leases on a git remote: a [lease.Backend] whose
// records are commits on refs of any repository git can push to
// (git+file://, git+git://, git+ssh://, git+https://).
//
// Each kind is the ref refs/durable-lease/<ns>/leases/<kind>; its tip
// commit's tree holds the record (record.json, the directory store's
// JSON) and the kind's fence (fence). A release writes a tombstone commit
// (a tree with fence and released) instead of deleting the ref, so fences
// only grow. Every write is a compare-and-swap:
// git push --atomic --force-with-lease=<ref>:<tip read> of a commit whose
// parent is that tip, so a ref is never rewound and of racing writers
// exactly one wins; the losers read again and decide again. A write whose
// reply is lost is settled by reading the ref again, never by guessing.
// Journal events go to refs/durable-lease/<ns>/journal in the same atomic
// push as the change they record, one commit per event (the message is
// the event's JSON line).
//
// # Time: the patience rule
//
// The git protocol carries no server time and committer dates are the
// client's say-so, so liveness never depends on them. A holder counts its
// TTL from the send time of its own confirmed write, on the host's boot
// clock where it has one. Any other process counts from the moment
// its host first saw the tip commit: a record is live until the host has
// watched the same tip unchanged for longer than the TTL plus a margin
// ([Margin]). Those moments outlive the process in a state file per
// store under the user's cache directory ([WithStateDir]), so a
// contender's watch spans its CLI calls. A record seen for the first
// time is therefore held, never free, and an unreadable one is unknown. The cost: a takeover of a dead
// holder may take up to about two TTLs (the holder's last TTL plus the
// contender's own watch when it arrives late), and the rule assumes that
// clocks run at about the same rate, not that they agree.
package gitstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// Scheme is the store scheme this package serves: every git+… URL.
const Scheme = "git"

// RulePatience is the [lease.Liveness.Rule] of a record judged by the
// patience rule.
const RulePatience = "patience"

// DefaultNamespace is the namespace of a URL without a fragment.
const DefaultNamespace = "default"

// CallTimeout bounds every git invocation: a remote that does not answer
// within it is [ErrUnreachable].
const CallTimeout = 20 * time.Second

// maxRounds bounds the compare-and-swap rounds of one Update.
const maxRounds = 64

// ErrUnreachable reports a remote that git could not reach or that did not
// answer within [CallTimeout].
var ErrUnreachable = fmt.Errorf("%w: git remote unreachable", lease.ErrUnavailable)

// Margin is what a contender waits beyond the TTL before it counts a
// record it has watched unchanged as expired: a tenth of the TTL, at
// least a second.
func Margin(ttl time.Duration) time.Duration { return max(ttl/10, time.Second) }

var nsPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Location is a parsed store URL.
type Location struct {
	Remote    string // the URL given to git
	Namespace string
	File      bool // a git+file:// remote: protocol.file.allow=always
}

// String is the store URL.
func (l Location) String() string {
	return "git+" + l.Remote + "#" + l.Namespace
}

// ParseURL parses git+<remote>[#namespace]. It refuses credentials in the
// URL: they belong in a git credential helper (or ssh keys).
func ParseURL(raw string) (Location, error) {
	rest, ok := strings.CutPrefix(raw, "git+")
	if !ok {
		return Location{}, fmt.Errorf("%w: gitstore: store URL must start with git+", lease.ErrInvalid)
	}
	remote, ns, hasNS := strings.Cut(rest, "#")
	if !hasNS {
		ns = DefaultNamespace
	}
	if !nsPattern.MatchString(ns) {
		return Location{}, fmt.Errorf("%w: gitstore: namespace %q must match %s", lease.ErrInvalid, ns, nsPattern)
	}
	if remote == "" || strings.HasPrefix(remote, "-") || strings.ContainsAny(remote, "\x00\n\r") {
		return Location{}, fmt.Errorf("%w: gitstore: bad remote in store URL", lease.ErrInvalid)
	}
	refuse := fmt.Errorf("%w: gitstore: the store URL carries credentials; remove them and configure a git credential helper (git config credential.helper) or an ssh key instead", lease.ErrInvalid)
	loc := Location{Remote: remote, Namespace: ns}
	if u, err := url.Parse(remote); err == nil && u.Scheme != "" && strings.Contains(remote, "://") {
		switch u.Scheme {
		case "file", "git", "ssh", "http", "https", "git+ssh", "ssh+git":
		default:
			return Location{}, fmt.Errorf("%w: gitstore: unsupported remote scheme %q", lease.ErrInvalid, u.Scheme)
		}
		if u.User != nil {
			if _, hasPw := u.User.Password(); hasPw || u.Scheme == "http" || u.Scheme == "https" {
				return Location{}, refuse
			}
		}
		for k := range u.Query() {
			if k := strings.ToLower(k); strings.Contains(k, "token") || strings.Contains(k, "password") || strings.Contains(k, "key") {
				return Location{}, refuse
			}
		}
		loc.File = u.Scheme == "file"
	} else if i := strings.Index(remote, "@"); i >= 0 && strings.Contains(remote[:i], ":") {
		// scp-like user:password@host:path
		return Location{}, refuse
	}
	return loc, nil
}

// Backend is a lease store on a git remote. It is safe for concurrent use.
type Backend struct {
	loc     Location
	clock   lease.Clock
	scratch string
	seq     atomic.Int64
	timeout time.Duration // per git call: CallTimeout

	obs *observations // the host's sightings (patience rule)

	// afterPush, in tests, runs after a push and may replace its result
	// (a lost reply).
	afterPush func(err error) error
}

// Option configures a [Backend].
type Option func(*config)

type config struct {
	stateDir    string
	stateDirSet bool
}

// WithStateDir keeps the host's sightings of tips (see the package
// documentation) in dir, which is created private if missing and must
// belong to the user and be writable by no one else; "" keeps them in
// memory, for this process alone. Without it they are kept in
// [DefaultStateDir] with the real clock and in memory with any other.
func WithStateDir(dir string) Option {
	return func(c *config) { c.stateDir, c.stateDirSet = dir, true }
}

// NewBackend parses url and makes a backend with a private scratch
// repository. It does not contact the remote.
func NewBackend(url string, clock lease.Clock, opts ...Option) (*Backend, error) {
	loc, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if clock == nil {
		clock = lease.WallClock{}
	}
	if _, real := clock.(lease.WallClock); real && !cfg.stateDirSet {
		cfg.stateDir, _ = DefaultStateDir() // none: memory only
	}
	obs := &observations{store: loc.String(), clock: clock}
	if cfg.stateDir != "" {
		obs.path = stateFile(cfg.stateDir, obs.store)
	}
	dir, err := os.MkdirTemp("", "gitstore-")
	if err != nil {
		return nil, fmt.Errorf("gitstore: scratch repository: %w", err)
	}
	b := &Backend{loc: loc, clock: clock, scratch: dir, timeout: CallTimeout, obs: obs}
	if _, err := b.git(context.Background(), nil, "init", "--quiet", "--bare", dir); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("gitstore: scratch repository: %w", err)
	}
	return b, nil
}

// Open opens url as a [lease.Store] and checks that the remote answers. It
// returns the function that removes the scratch repository.
func Open(ctx context.Context, url string, opts ...lease.Option) (*lease.Store, func() error, error) {
	clock, err := lease.ClockOf(opts...)
	if err != nil {
		return nil, nil, err
	}
	b, err := NewBackend(url, clock)
	if err != nil {
		return nil, nil, err
	}
	if _, err := b.Names(ctx); err != nil {
		b.Close()
		return nil, nil, err
	}
	s, err := lease.New(b, opts...)
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return s, b.Close, nil
}

// WhyNoPools says why a git store keeps no pools (pool.PoolRefuser): a
// pool's queue is many small writes by many waiters, each a push here.
func (b *Backend) WhyNoPools() string {
	return "a git store keeps leases and batons (lease, pool-run --kind K), not pools, whose queue would be a push per waiter per heartbeat; use a directory store on one host or an etcd:// store across machines"
}

// Close removes the scratch repository.
func (b *Backend) Close() error { return os.RemoveAll(b.scratch) }

// String names the store.
func (b *Backend) String() string { return b.loc.String() }

// Location is where the store is.
func (b *Backend) Location() Location { return b.loc }

// Now is the store's clock.
func (b *Backend) Now() time.Time { return b.clock.Now() }

func (b *Backend) leaseRef(kind string) string {
	return "refs/durable-lease/" + b.loc.Namespace + "/leases/" + kind
}

// JournalWhere names the journal's ref, for messages.
func (b *Backend) JournalWhere() string { return b.JournalRef() }

// JournalRef is the ref of the store's journal.
func (b *Backend) JournalRef() string { return "refs/durable-lease/" + b.loc.Namespace + "/journal" }

func checkKind(kind string) error {
	if !lease.ValidKind(kind) || strings.Contains(kind, "..") || strings.HasSuffix(kind, ".lock") || strings.HasSuffix(kind, ".") {
		return fmt.Errorf("%w: kind %q must match %s and be a ref name", lease.ErrInvalid, kind, lease.KindPattern)
	}
	return nil
}

// scrubbedEnv is the environment git runs in: the user's, minus what
// would point git elsewhere or make it talk.
func scrubbedEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "GIT_DIR", k == "GIT_WORK_TREE", k == "GIT_INDEX_FILE", k == "GIT_OBJECT_DIRECTORY",
			k == "GIT_ALTERNATE_OBJECT_DIRECTORIES", k == "GIT_NAMESPACE", k == "GIT_COMMON_DIR",
			k == "GIT_TERMINAL_PROMPT", k == "GIT_QUARANTINE_PATH",
			strings.HasPrefix(k, "GIT_CONFIG"), strings.HasPrefix(k, "GIT_TRACE"),
			strings.HasPrefix(k, "GIT_AUTHOR_"), strings.HasPrefix(k, "GIT_COMMITTER_"):
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=durable-lease", "GIT_AUTHOR_EMAIL=durable-lease@localhost",
		"GIT_COMMITTER_NAME=durable-lease", "GIT_COMMITTER_EMAIL=durable-lease@localhost")
}

// gitError is a failed git invocation, with its stderr redacted.
type gitError struct {
	args    string
	stderr  string
	timeout bool
	bound   time.Duration
	err     error
}

func (e *gitError) Error() string {
	if e.timeout {
		return fmt.Sprintf("git %s: no answer within %s", e.args, e.bound)
	}
	return fmt.Sprintf("git %s: %v: %s", e.args, e.err, strings.TrimSpace(e.stderr))
}

var credRE = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]*@`)

func redact(s string) string { return credRE.ReplaceAllString(s, "${1}***@") }

// git runs git in the scratch repository with stdin, under CallTimeout.
func (b *Backend) git(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	allow := "never"
	if b.loc.File {
		allow = "always"
	}
	full := append([]string{"-c", "core.hooksPath=/dev/null", "-c", "protocol.file.allow=" + allow,
		"-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c", "fetch.writeFetchHead=false"}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Dir = b.scratch
	if args[0] != "init" {
		cmd.Env = append(scrubbedEnv(), "GIT_DIR="+b.scratch)
	} else {
		cmd.Env = scrubbedEnv()
	}
	ownGroup(cmd)
	cmd.WaitDelay = time.Second
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		name := args[0]
		return out.Bytes(), &gitError{args: name, stderr: redact(errb.String()), timeout: ctx.Err() != nil, bound: b.timeout, err: err}
	}
	return out.Bytes(), nil
}

func (b *Backend) unreachable(what string, err error) error {
	return fmt.Errorf("%w: %s: %s: %v", ErrUnreachable, b.loc, what, err)
}

// tip is one ref as read: its commit ("" when absent), the record (nil for
// none or a tombstone) and the kind's fence.
type tip struct {
	sha   string
	rec   *lease.Record
	fence int64
}

// fetch reads ref from the remote into the scratch repository and returns
// its commit, "" when the remote has no such ref.
func (b *Backend) fetch(ctx context.Context, ref string) (string, error) {
	local := fmt.Sprintf("refs/scratch/%d", b.seq.Add(1))
	_, err := b.git(ctx, nil, "fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--", b.loc.Remote, "+"+ref+":"+local)
	if err != nil {
		var ge *gitError
		if errors.As(err, &ge) && !ge.timeout && strings.Contains(ge.stderr, "couldn't find remote ref") {
			return "", nil
		}
		return "", b.unreachable("read "+ref, err)
	}
	out, err := b.git(ctx, nil, "rev-parse", "--verify", "--quiet", local+"^{commit}")
	_, _ = b.git(context.WithoutCancel(ctx), nil, "update-ref", "-d", local)
	if err != nil {
		return "", fmt.Errorf("gitstore: %s: %w", ref, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func (b *Backend) load(ctx context.Context, kind string) (tip, error) {
	sha, err := b.fetch(ctx, b.leaseRef(kind))
	if err != nil || sha == "" {
		return tip{}, err
	}
	t := tip{sha: sha}
	ls, err := b.git(ctx, nil, "ls-tree", "-z", "-l", sha)
	if err != nil {
		return t, fmt.Errorf("gitstore: %s: %w", kind, err)
	}
	// The tip is untrusted: anyone who can push may have put it there.
	// A blob larger than a record may be is never read, and a fence
	// that is missing or not a positive number makes the record
	// unknown, so a planted tip can neither exhaust memory nor rewind
	// the kind's fence.
	files := map[string]string{}
	oversized := false
	for _, ent := range strings.Split(string(ls), "\x00") {
		meta, name, ok := strings.Cut(ent, "\t")
		if f := strings.Fields(meta); ok && len(f) == 4 && f[1] == "blob" {
			if n, err := strconv.ParseInt(f[3], 10, 64); err != nil || n > lease.MaxRecordBytes {
				oversized = true
				continue
			}
			files[name] = f[2]
		}
	}
	blob := func(name string) ([]byte, bool) {
		id, ok := files[name]
		if !ok {
			return nil, false
		}
		data, err := b.git(ctx, nil, "cat-file", "blob", id)
		return data, err == nil
	}
	fenceOK := false
	if data, ok := blob("fence"); ok {
		f, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err == nil && f > 0 {
			t.fence, fenceOK = f, true
		}
	}
	if _, released := files["released"]; released && fenceOK && !oversized {
		return t, nil
	}
	var data []byte
	if fenceOK && !oversized {
		if d, ok := blob("record.json"); ok {
			data = d
		}
	}
	t.rec = lease.DecodeRecord(kind, data)
	t.rec.Fence = t.fence
	t.rec.Seen = b.judge(kind, sha, t.rec)
	return t, nil
}

// judge applies the patience rule to the record at commit sha.
func (b *Backend) judge(kind, sha string, r *lease.Record) lease.Liveness {
	if r.Corrupt {
		return lease.Liveness{Rule: lease.RuleCorrupt}
	}
	seenAgo, sentAgo, own := b.obs.observe(kind, sha)
	now := b.clock.Now()
	exp := now.Add(r.TTL() + Margin(r.TTL()) - seenAgo)
	if own {
		exp = now.Add(r.TTL() - sentAgo)
	}
	return lease.Liveness{Live: !now.After(exp), ExpiresAt: exp, Rule: RulePatience}
}

// Read returns kind's record, nil when there is none.
func (b *Backend) Read(ctx context.Context, kind string) (*lease.Record, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	t, err := b.load(ctx, kind)
	return t.rec, err
}

// Names lists the kinds that have a record (tombstones are no record).
func (b *Backend) Names(ctx context.Context) ([]string, error) {
	prefix := "refs/durable-lease/" + b.loc.Namespace + "/leases/"
	out, err := b.git(ctx, nil, "ls-remote", "--refs", "--", b.loc.Remote, prefix+"*")
	if err != nil {
		return nil, b.unreachable("list", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		_, ref, ok := strings.Cut(line, "\t")
		kind, isLease := strings.CutPrefix(ref, prefix)
		if !ok || !isLease {
			continue
		}
		if checkKind(kind) != nil {
			names = append(names, kind)
			continue
		}
		t, err := b.load(ctx, kind)
		if err != nil {
			return nil, err
		}
		if t.rec != nil {
			names = append(names, kind)
		}
	}
	sort.Strings(names)
	return names, nil
}

// object writes a blob to the scratch repository.
func (b *Backend) blob(ctx context.Context, data []byte) (string, error) {
	out, err := b.git(ctx, data, "hash-object", "-w", "--stdin")
	return strings.TrimSpace(string(out)), err
}

// commit makes a commit of files (name -> content) on parent.
func (b *Backend) commit(ctx context.Context, parent string, files map[string][]byte, msg string) (string, error) {
	var tree bytes.Buffer
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		id, err := b.blob(ctx, files[n])
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&tree, "100644 blob %s\t%s\x00", id, n)
	}
	out, err := b.git(ctx, tree.Bytes(), "mktree", "-z")
	if err != nil {
		return "", err
	}
	args := []string{"commit-tree", strings.TrimSpace(string(out)), "-F", "-"}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	out, err = b.git(ctx, []byte(msg), args...)
	return strings.TrimSpace(string(out)), err
}

// push is one update to be pushed: ref from old (the tip read, "" for
// none) to commit.
type push struct{ ref, old, commit string }

// errLost reports a compare-and-swap lost to another writer.
var errLost = errors.New("gitstore: lost the race")

func (b *Backend) push(ctx context.Context, ps []push) error {
	args := []string{"push", "--porcelain", "--quiet", "--atomic", "--no-verify"}
	for _, p := range ps {
		args = append(args, "--force-with-lease="+p.ref+":"+p.old)
	}
	args = append(args, "--", b.loc.Remote)
	for _, p := range ps {
		args = append(args, p.commit+":"+p.ref)
	}
	out, err := b.git(ctx, nil, args...)
	if b.afterPush != nil {
		err = b.afterPush(err)
	}
	if err == nil {
		return nil
	}
	var ge *gitError
	text := string(out)
	if errors.As(err, &ge) {
		text += ge.stderr
	}
	for _, s := range []string{"stale info", "failed to update ref", "cannot lock ref", "fetch first", "non-fast-forward", "atomic push failed", "[rejected]"} {
		if strings.Contains(text, s) {
			return errLost
		}
	}
	return err
}

// Update implements [lease.Backend.Update] by compare-and-swap rounds.
func (b *Backend) Update(ctx context.Context, kind string, fn func(cur *lease.Record) (lease.Change, error)) (*lease.Record, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	for round := 1; ; round++ {
		t, err := b.load(ctx, kind)
		if err != nil {
			return nil, err
		}
		ch, err := fn(t.rec)
		if err != nil {
			return nil, err
		}
		rec, done, err := b.apply(ctx, kind, t, ch)
		if err != nil || done {
			return rec, err
		}
		if round == maxRounds {
			return nil, fmt.Errorf("gitstore: %s: gave up after %d conflicting updates", kind, round)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("gitstore: %s: %w", kind, err)
		}
	}
}

// apply tries to commit ch over t once. done is false when the round was
// lost (or its outcome was settled as not made) and fn must decide again.
func (b *Backend) apply(ctx context.Context, kind string, t tip, ch lease.Change) (*lease.Record, bool, error) {
	var ps []push
	var rec *lease.Record
	var files map[string][]byte
	fence := t.fence
	switch ch.Op {
	case lease.OpNone:
	case lease.OpAcquire:
		if ch.Record == nil || ch.Record.Corrupt || ch.Record.Token == "" {
			return nil, true, fmt.Errorf("gitstore: %s: acquire needs a whole record with a token", kind)
		}
		fence++
		r := *ch.Record
		rec = &r
	case lease.OpRenew:
		switch {
		case ch.Record == nil || ch.Record.Corrupt:
			return nil, true, fmt.Errorf("gitstore: %s: renew needs a whole record", kind)
		case t.rec == nil:
			return nil, true, fmt.Errorf("%w: %s has no record to renew", lease.ErrNotHeld, kind)
		case t.rec.Corrupt || !t.rec.Seen.Live:
			return nil, true, fmt.Errorf("%w: the lease %s has lapsed; it is never revived", lease.ErrExpired, kind)
		case ch.Record.Token != t.rec.Token:
			return nil, true, fmt.Errorf("%w: a renewal of %s must keep its token", lease.ErrNotOwner, kind)
		}
		r := *ch.Record
		rec = &r
	case lease.OpDelete:
		if t.rec == nil && ch.Event == nil {
			return nil, true, nil
		}
		if t.rec != nil {
			files = map[string][]byte{"fence": []byte(strconv.FormatInt(fence, 10) + "\n"), "released": []byte("true\n")}
		}
	default:
		return nil, true, fmt.Errorf("gitstore: %s: unknown operation %d", kind, ch.Op)
	}
	if rec != nil {
		rec.Kind = kind
		data, err := rec.EncodeFile()
		if err != nil {
			return nil, true, fmt.Errorf("gitstore: %s: %w", kind, err)
		}
		files = map[string][]byte{"fence": []byte(strconv.FormatInt(fence, 10) + "\n"), "record.json": data}
	}
	var lc string
	if files != nil {
		msg := fmt.Sprintf("durable-lease %s %s fence %d\n", opName(ch.Op), kind, fence)
		c, err := b.commit(ctx, t.sha, files, msg)
		if err != nil {
			return nil, true, fmt.Errorf("gitstore: %s: %w", kind, err)
		}
		lc = c
		ps = append(ps, push{b.leaseRef(kind), t.sha, c})
	}
	var jc string
	if ch.Event != nil {
		jtip, err := b.fetch(ctx, b.JournalRef())
		if err != nil {
			return nil, true, err
		}
		e := *ch.Event
		if e.At.IsZero() {
			e.At = b.Now()
		}
		line, err := e.MarshalJSON()
		if err != nil {
			return nil, true, fmt.Errorf("gitstore: journal: %w", err)
		}
		if jc, err = b.commit(ctx, jtip, map[string][]byte{"event.json": append(line, '\n')}, string(line)+"\n"); err != nil {
			return nil, true, fmt.Errorf("gitstore: journal: %w", err)
		}
		ps = append(ps, push{b.JournalRef(), jtip, jc})
	}
	if len(ps) == 0 {
		return nil, true, nil
	}
	sent, sentStamp := b.Now(), b.obs.now()
	err := b.push(ctx, ps)
	if errors.Is(err, errLost) {
		return nil, false, nil
	}
	if err != nil {
		// The outcome is unknown: settle it by reading the ref again.
		now, rerr := b.fetch(context.WithoutCancel(ctx), ps[0].ref)
		switch {
		case rerr != nil:
			return nil, true, fmt.Errorf("%w: %s: the outcome of a write to %s is unknown: %v", ErrUnreachable, b.loc, kind, err)
		case now == ps[0].commit:
			// Ours: the atomic push made every update.
		default:
			// Another commit (lost) or unchanged (not made): decide again.
			return nil, false, nil
		}
	}
	if rec == nil {
		return nil, true, nil
	}
	b.obs.confirm(kind, lc, sentStamp)
	rec.Fence = fence
	rec.Seen = lease.Liveness{Live: true, ExpiresAt: sent.Add(rec.TTL()), Rule: RulePatience}
	return rec, true, nil
}

func opName(op lease.Op) string {
	switch op {
	case lease.OpAcquire:
		return "acquire"
	case lease.OpRenew:
		return "renew"
	case lease.OpDelete:
		return "release"
	}
	return "journal"
}

// Journal appends e to the journal ref on its own.
func (b *Backend) Journal(ctx context.Context, e lease.Event) error {
	for round := 1; ; round++ {
		_, done, err := b.apply(ctx, "", tip{}, lease.Change{Op: lease.OpNone, Event: &e})
		if err != nil || done {
			return err
		}
		if round == maxRounds {
			return fmt.Errorf("gitstore: journal: gave up after %d conflicting appends", round)
		}
	}
}

// Events reads the journal, oldest first.
func (b *Backend) Events(ctx context.Context) ([]lease.Event, error) {
	sha, err := b.fetch(ctx, b.JournalRef())
	if err != nil || sha == "" {
		return nil, err
	}
	out, err := b.git(ctx, nil, "log", "--reverse", "--format=%B%x00", sha)
	if err != nil {
		return nil, fmt.Errorf("gitstore: journal: %w", err)
	}
	var evs []lease.Event
	for _, msg := range strings.Split(string(out), "\x00") {
		msg = strings.TrimSpace(msg)
		if msg == "" {
			continue
		}
		e, err := decodeEvent([]byte(msg))
		if err != nil {
			return nil, fmt.Errorf("gitstore: journal: %w", err)
		}
		evs = append(evs, e)
	}
	return evs, nil
}

var _ lease.Backend = (*Backend)(nil)

// decodeEvent parses one journal line.
func decodeEvent(line []byte) (lease.Event, error) {
	var e struct {
		lease.Event
		At       string          `json:"at"`
		Previous json.RawMessage `json:"previous"`
	}
	if err := json.Unmarshal(line, &e); err != nil {
		return lease.Event{}, err
	}
	if len(e.Previous) > 0 && string(e.Previous) != "null" {
		e.Event.Previous = lease.DecodeRecord(e.Kind, e.Previous)
	}
	e.Event.At, _ = time.Parse(time.RFC3339Nano, e.At)
	return e.Event, nil
}
