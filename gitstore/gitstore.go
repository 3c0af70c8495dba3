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
// # Time: the server's Date, else the patience rule
//
// Committer dates are the client's say-so, so liveness never depends on
// them. Over smart HTTP the replies carry the server's Date: a record
// written and read with one is judged on the server's clock
// ([RuleServerDate], docs/PROTOCOL.md §10.6). The git protocol itself
// carries no server time, so over ssh, git:// and file:// the patience
// rule decides ([RulePatience]). A holder counts its TTL from the send
// time of its own confirmed write, on the host's boot clock where it has
// one. Any other process counts from the moment its host first saw the
// tip commit: a record is live until the host has watched the same tip
// unchanged for longer than the TTL plus a margin ([Margin]). Those
// moments outlive the process in a state file per store under the user's
// cache directory ([WithStateDir]), so a contender's watch spans its CLI
// calls. A record seen for the first time is therefore held, never free,
// and an unreadable one is unknown. The cost: a takeover of a dead holder
// may take up to about two TTLs (the holder's last TTL plus the
// contender's own watch when it arrives late), and the rule assumes that
// clocks run at about the same rate, not that they agree.
package gitstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mathrand "math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
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

// PollInterval is how often a waiter re-reads a held lease on a git store
// (each read is a fetch from the remote), unless the store's options say
// otherwise.
const PollInterval = 2 * time.Second

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
	File      bool // a git+file:// remote: the file protocol is allowed
	HTTP      bool // smart HTTP(S): replies carry the server's Date
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
	if strings.Contains(remote, "://") {
		u, err := url.Parse(remote)
		if err != nil {
			// Unparsed, it could not be checked for credentials.
			return Location{}, fmt.Errorf("%w: gitstore: the remote of the store URL is not a valid URL", lease.ErrInvalid)
		}
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
		if u.RawQuery != "" || u.ForceQuery {
			// A query is where signed URLs keep their secrets (token=,
			// sig=, X-Amz-Signature=); no git remote needs one here.
			return Location{}, refuse
		}
		loc.File = u.Scheme == "file"
		loc.HTTP = u.Scheme == "http" || u.Scheme == "https"
	} else {
		// No scheme: scp-like [user@]host:path (a colon before any
		// slash), else a local path, which the file protocol serves
		// only when the URL says so.
		colon := strings.Index(remote, ":")
		switch {
		case strings.Contains(remote, "::"):
			return Location{}, fmt.Errorf("%w: gitstore: %q names a git remote helper (<transport>::<address>); a store takes file, git, ssh, http(s) or scp-like remotes only", lease.ErrInvalid, remote)
		case colon < 0 || strings.Contains(remote[:colon], "/"):
			return Location{}, fmt.Errorf("%w: gitstore: %q is a local path; write it as git+file://<absolute path> (the file protocol is allowed only for git+file stores)", lease.ErrInvalid, remote)
		}
		if i := strings.Index(remote, "@"); i >= 0 && strings.Contains(remote[:i], ":") {
			// scp-like user:password@host:path
			return Location{}, refuse
		}
	}
	return loc, nil
}

// Backend is a lease store on a git remote. It is safe for concurrent use.
type Backend struct {
	loc     Location
	clock   lease.Clock
	scratch string
	timeout time.Duration // per git call: CallTimeout

	// fetchMu serializes fetches into the scratch repository (a shallow
	// fetch rewrites its list of shallow commits) and the reads of what
	// they fetched.
	fetchMu sync.Mutex

	obs *observations // the host's sightings (patience rule)

	// pushHook, in tests, makes each push instead of the backend: with
	// push, the real one (of any updates: a push that lands late), and
	// its own result (a lost reply); onGit, in tests, sees every git
	// command line.
	pushHook func(ps []push, push func([]push) error) error
	onGit    func(args []string)
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
	if _, err := b.git(context.Background(), nil, "init", "--quiet", "--bare", "--template=", dir); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("gitstore: scratch repository: %w", err)
	}
	return b, nil
}

// Open opens url as a [lease.Store]. Like [NewBackend] it does not contact
// the remote: the first operation does, and reports [ErrUnreachable] if
// it does not answer (a probe here would cost every CLI call a round
// trip). It returns the function that removes the scratch repository.
func Open(ctx context.Context, url string, opts ...lease.Option) (*lease.Store, func() error, error) {
	clock, err := lease.ClockOf(opts...)
	if err != nil {
		return nil, nil, err
	}
	b, err := NewBackend(url, clock)
	if err != nil {
		return nil, nil, err
	}
	s, err := lease.New(b, append([]lease.Option{lease.WithPollInterval(PollInterval)}, opts...)...)
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
			k == "GIT_TERMINAL_PROMPT", k == "GIT_QUARANTINE_PATH", k == "GIT_ALLOW_PROTOCOL",
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

// command is git with args in the scratch repository, hardened: no
// hooks, the file protocol only for a git+file store, no automatic
// maintenance, the scrubbed environment, in its own process group.
func (b *Backend) command(ctx context.Context, args ...string) *exec.Cmd {
	if b.onGit != nil {
		b.onGit(args)
	}
	full := append([]string{"-c", "core.hooksPath=/dev/null",
		"-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c", "fetch.writeFetchHead=false"}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Dir = b.scratch
	// Only the transports a store URL may name, whatever the user's
	// configuration allows: never a remote helper (ext::, fd:: or any
	// other), and the file protocol only for a git+file store.
	allow := "git:ssh:https:http"
	if b.loc.File {
		allow += ":file"
	}
	cmd.Env = append(scrubbedEnv(), "GIT_ALLOW_PROTOCOL="+allow)
	if args[0] != "init" {
		cmd.Env = append(cmd.Env, "GIT_DIR="+b.scratch)
	}
	ownGroup(cmd)
	cmd.WaitDelay = time.Second
	return cmd
}

// git runs git in the scratch repository with stdin, under CallTimeout.
func (b *Backend) git(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	cmd := b.command(ctx, args...)
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
	sha    string
	rec    *lease.Record
	fence  int64
	srv    serverTime // what the read learned of the server's clock
	holder time.Time  // until when the holder may count on rec (judge)
	err    error      // the ref is not a commit
}

// fullDepth is git's way of saying "the whole history" to fetch --depth.
const fullDepth = 2147483647

// scratchRef is where ref is fetched to in the scratch repository.
func scratchRef(ref string) string { return "refs/scratch/" + strings.TrimPrefix(ref, "refs/") }

// fetch reads refs from the remote into the scratch repository, their tip
// commits only (a lease's ref is a chain of one commit per write, and
// none of it but the tip matters), in one call. Refs the remote does not
// have are left out of what it fetched. It holds b.fetchMu, with which
// the caller reads what it fetched.
func (b *Backend) fetch(ctx context.Context, depth int, refs ...string) (map[string]bool, time.Time, error) {
	have := map[string]bool{}
	want := slices.Clone(refs)
	var latest time.Time
	for len(want) > 0 {
		args := []string{"fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--depth=" + strconv.Itoa(depth), "--", b.loc.Remote}
		for _, r := range want {
			args = append(args, "+"+r+":"+scratchRef(r))
		}
		_, date, err := b.gitDated(ctx, args...)
		for n := 1; retryable(err) && n <= maxRetries; n++ {
			if werr := backoff(ctx, n); werr != nil {
				return nil, time.Time{}, b.unreachable("read "+strings.Join(refs, " "), err)
			}
			_, date, err = b.gitDated(ctx, args...)
		}
		if date.After(latest) {
			latest = date // a refusal's replies are the server's too
		}
		if err == nil {
			for _, r := range want {
				have[r] = true
			}
			return have, latest, nil
		}
		// git stops at the first ref the remote lacks, and names it.
		var ge *gitError
		if !errors.As(err, &ge) || ge.timeout {
			return nil, time.Time{}, b.unreachable("read "+strings.Join(refs, " "), err)
		}
		_, missing, found := strings.Cut(ge.stderr, "couldn't find remote ref ")
		missing, _, _ = strings.Cut(missing, "\n")
		missing = strings.TrimSpace(missing)
		i := slices.Index(want, missing)
		if !found || i < 0 {
			return nil, time.Time{}, b.unreachable("read "+strings.Join(refs, " "), err)
		}
		want = slices.Delete(want, i, i+1)
	}
	return have, latest, nil
}

// object is what git cat-file --batch said of one name: its id and type
// ("" when missing), and its content unless it was larger than max.
type object struct {
	id, typ string
	data    []byte
	size    int64
}

// query is a name for git cat-file and the most of its content to read.
type query struct {
	name string
	max  int64
}

// catFile looks qs up in the scratch repository with one git cat-file
// --batch, reading at most each query's max bytes of its object into
// memory (a larger one is skipped, its size reported).
func (b *Backend) catFile(ctx context.Context, qs ...query) ([]object, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	cmd := b.command(ctx, "cat-file", "--batch")
	var in strings.Builder
	for _, q := range qs {
		in.WriteString(q.name + "\n")
	}
	cmd.Stdin = strings.NewReader(in.String())
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	objs, perr := readBatch(bufio.NewReader(stdout), qs)
	if perr != nil {
		_ = cmd.Process.Kill()
	}
	werr := cmd.Wait()
	if perr == nil && werr != nil {
		perr = &gitError{args: "cat-file", stderr: redact(errb.String()), timeout: ctx.Err() != nil, bound: b.timeout, err: werr}
	}
	return objs, perr
}

// readBatch parses the replies of git cat-file --batch to qs.
func readBatch(r *bufio.Reader, qs []query) ([]object, error) {
	objs := make([]object, 0, len(qs))
	for _, q := range qs {
		max := q.max
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("git cat-file: %w", err)
		}
		f := strings.Fields(line)
		if len(f) == 2 && f[1] == "missing" || len(f) == 2 && f[1] == "ambiguous" {
			objs = append(objs, object{})
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("git cat-file: unexpected reply %q", line)
		}
		o := object{id: f[0], typ: f[1]}
		if o.size, err = strconv.ParseInt(f[2], 10, 64); err != nil || o.size < 0 {
			return nil, fmt.Errorf("git cat-file: unexpected reply %q", line)
		}
		if o.size <= max {
			o.data = make([]byte, o.size)
			if _, err := io.ReadFull(r, o.data); err != nil {
				return nil, fmt.Errorf("git cat-file: %w", err)
			}
		} else if _, err := io.CopyN(io.Discard, r, o.size); err != nil {
			return nil, fmt.Errorf("git cat-file: %w", err)
		}
		if c, err := r.ReadByte(); err != nil || c != '\n' {
			return nil, fmt.Errorf("git cat-file: reply not terminated")
		}
		objs = append(objs, o)
	}
	return objs, nil
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

// judge decides whether the record at commit sha is live, as any
// process but its holder must see it, and until when its holder may
// count on it (holder: zero when this host has no write of sha and the
// server's clock does not say).
//
// A record its writer stamped on the server's clock (serverStamped), read
// with the server's Date (smart HTTP), is judged on that clock: it is
// expired once the Date of the read is past the record's expiry plus
// [Margin]; its holder counts it lapsed a second before the server's
// clock can reach the expiry, on its own clock from the moment it sent
// the read (Dates are whole seconds and lag). Every other record is
// judged by the patience rule, and its holder's time by the send time of
// the host's own write (see the package documentation). The holder's
// deadline only ever refuses a renewal: every reader, the holder's own
// host included, is shown the contender's view, so that another process
// on the holder's host cannot take over before the margin is up.
func (b *Backend) judge(kind, sha string, r *lease.Record, srv serverTime, serverStamped bool) (live lease.Liveness, holder time.Time) {
	if r.Corrupt {
		return lease.Liveness{Rule: lease.RuleCorrupt}, time.Time{}
	}
	seenAgo, sentAgo, own := b.obs.observe(kind, sha)
	now := b.clock.Now()
	ttl := r.TTL()
	expiry := r.Heartbeat.Add(ttl)
	// A heartbeat later than the server's time is no honest writer's
	// (it read the server's Date before it wrote): patience decides.
	byServer := serverStamped && srv.known() && !r.Heartbeat.After(srv.date.Add(Margin(ttl)))
	if own {
		holder = now.Add(ttl - sentAgo)
	}
	if byServer {
		if e := srv.at.Add(expiry.Sub(srv.date) - time.Second); holder.IsZero() || e.Before(holder) {
			holder = e
		}
		deadline := expiry.Add(Margin(ttl))
		return lease.Liveness{Live: !srv.date.After(deadline), ExpiresAt: now.Add(deadline.Sub(srv.date)), Rule: RuleServerDate}, holder
	}
	exp := now.Add(addSat(ttl, Margin(ttl)) - seenAgo)
	return lease.Liveness{Live: !now.After(exp), ExpiresAt: exp, Rule: RulePatience}, holder
}

// addSat is a+b for durations that are not negative, at most the largest
// duration (a TTL of centuries plus its margin must not wrap to the past).
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
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

// maxRetries bounds the retries of a read the server asked to repeat
// later (HTTP 429 or 5xx).
const maxRetries = 3

var retryableRE = regexp.MustCompile(`returned error: (429|5[0-9][0-9])\b`)

// retryable reports a git call the server refused for now: HTTP 429 (rate
// limited) or a 5xx. A read is simply made again; a write's outcome is
// unknown and is read before anything else (see apply).
func retryable(err error) bool {
	var ge *gitError
	return errors.As(err, &ge) && !ge.timeout && retryableRE.MatchString(ge.stderr)
}

// backoff waits before the n-th retry: 250 ms doubled per retry, up to
// 2 s, each with up to half again at random so that racing processes do
// not retry in step. It returns early with ctx's error.
func backoff(ctx context.Context, n int) error {
	d := min(250*time.Millisecond<<(n-1), 2*time.Second)
	d += time.Duration(mathrand.Int64N(int64(d / 2)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errLost reports a compare-and-swap lost to another writer.
var errLost = errors.New("gitstore: lost the race")

func (b *Backend) push(ctx context.Context, ps []push) error {
	if b.pushHook != nil {
		return b.pushHook(ps, func(ps []push) error { return b.pushNow(ctx, ps) })
	}
	return b.pushNow(ctx, ps)
}

// pushNow pushes ps in one atomic push: nil when every update was made,
// errLost when the compare-and-swap was lost, another error when the
// outcome is unknown.
func (b *Backend) pushNow(ctx context.Context, ps []push) error {
	args := []string{"push", "--porcelain", "--quiet", "--atomic", "--no-verify"}
	if b.loc.File {
		// On a git+file remote the receiving side runs here, as this
		// user: the remote's own hooks (which anyone who can write to
		// it can plant) must not run. (A server's hooks are the
		// server's business.)
		args = append(args, "--receive-pack=git -c core.hooksPath=/dev/null receive-pack")
	}
	for _, p := range ps {
		args = append(args, "--force-with-lease="+p.ref+":"+p.old)
	}
	args = append(args, "--", b.loc.Remote)
	for _, p := range ps {
		args = append(args, p.commit+":"+p.ref)
	}
	out, err := b.git(ctx, nil, args...)
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
	pending := newAttempts()
	for round := 1; ; round++ {
		if pending.unknown >= maxUnknown {
			return nil, fmt.Errorf("%w: %s: the outcome of %d writes to %s is unknown: the remote answers reads but not pushes", ErrUnreachable, b.loc, pending.unknown, kind)
		}
		// The journal's tip comes with the lease's: a change that
		// records an event pushes both.
		t, jtip, err := b.load(ctx, kind, true)
		if err != nil {
			return nil, err
		}
		if w := pending.writes[t.sha]; w != nil {
			// A push whose outcome was unknown, and whose ref read
			// unchanged afterwards, has landed since: it was still on
			// its way. It is this update's success.
			return b.landed(kind, t.sha, w), nil
		}
		ch, err := fn(t.rec)
		if err != nil {
			return nil, err
		}
		rec, done, err := b.apply(ctx, kind, t, jtip, ch, pending)
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

// UpdateReadsFirst implements [lease.ReadingUpdater]: Update takes no
// lock; it fetches, and pushes only a change.
func (b *Backend) UpdateReadsFirst() bool { return true }

var _ lease.ReadingUpdater = (*Backend)(nil)

// apply tries to commit ch over t (and its event over the journal's tip
// jtip) once. done is false when the round was
// lost (or its outcome was settled as not made) and fn must decide again.
// Every push not confirmed is noted in pending, by the commit it would
// have put on ps[0]'s ref.
func (b *Backend) apply(ctx context.Context, kind string, t tip, jtip string, ch lease.Change, pending *attempts) (*lease.Record, bool, error) {
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
		case t.rec.Corrupt || !t.rec.Seen.Live || !t.holder.IsZero() && b.clock.Now().After(t.holder):
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
	stamped := rec != nil && t.srv.known()
	if rec != nil {
		rec.Kind = kind
		if stamped {
			stampServer(rec, t.srv, ch.Op == lease.OpAcquire)
		}
		data, err := rec.EncodeFile()
		if err != nil {
			return nil, true, fmt.Errorf("gitstore: %s: %w", kind, err)
		}
		files = map[string][]byte{"fence": []byte(strconv.FormatInt(fence, 10) + "\n"), "record.json": data}
		if stamped {
			files["clock"] = []byte(clockServer)
		}
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
		if jtip == badJournal {
			return nil, true, fmt.Errorf("gitstore: the journal %s is not a commit: durable-lease did not write it; check it, then delete it (git push <remote> :%s)", b.JournalRef(), b.JournalRef())
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
	w := &write{rec: rec, fence: fence, sent: b.Now(), sentStamp: b.obs.now(), srv: t.srv, stamped: stamped}
	// Whatever the push reports, a later read that finds this commit on
	// the tip means it landed: a refusal is no proof that it did not
	// (over HTTP the transport resends a request whose reply was lost on
	// a reused connection, and the resent copy loses to the first).
	pending.writes[ps[0].commit] = w
	err := b.push(ctx, ps)
	if errors.Is(err, errLost) {
		return nil, false, nil
	}
	if err != nil {
		// The outcome is unknown: settle it by reading the ref again.
		// With the caller's deadline: past it the outcome stays
		// unknown, which is what the caller is told.
		now, rerr := b.tipOf(ctx, ps[0].ref)
		switch {
		case rerr != nil:
			return nil, true, fmt.Errorf("%w: %s: the outcome of a write to %s is unknown: %v", ErrUnreachable, b.loc, kind, err)
		case now == ps[0].commit:
			// Ours: the atomic push made every update.
		case now == ps[0].old:
			// Not made yet; decide again (it is still ours if it
			// turns up on the tip after all).
			pending.unknown++
			if err := backoff(ctx, 1); err != nil {
				return nil, true, err
			}
			return nil, false, nil
		default:
			// Another writer's commit: lost. Decide again.
			return nil, false, nil
		}
	}
	return b.landed(kind, lc, w), true, nil
}

// maxUnknown is how many pushes of one update may end with an unknown
// outcome (each up to CallTimeout, then a read) before it gives up as
// unavailable: a remote that answers reads but never a push.
const maxUnknown = 3

// attempts are an update's pushes not confirmed, by the commit each
// would have put on its ref, and how many ended with an unknown outcome.
type attempts struct {
	writes  map[string]*write
	unknown int
}

func newAttempts() *attempts { return &attempts{writes: map[string]*write{}} }

// write is a push made: what it wrote and when.
type write struct {
	rec       *lease.Record // nil for a tombstone or a journal entry alone
	fence     int64
	sent      time.Time
	sentStamp stamp
	srv       serverTime // of the read it was decided on
	stamped   bool       // rec's times are the server's
}

// landed is the record of w, confirmed on kind's ref as commit lc.
func (b *Backend) landed(kind, lc string, w *write) *lease.Record {
	if w.rec == nil {
		return nil
	}
	b.obs.confirm(kind, lc, w.sentStamp)
	rec := w.rec
	rec.Fence = w.fence
	rec.Seen = lease.Liveness{ExpiresAt: w.sent.Add(rec.TTL()), Rule: RulePatience}
	if w.stamped {
		// The server's clock was behind srv.date+1s when the read was
		// sent, so it reaches the record's expiry no sooner than this,
		// on ours.
		rec.Seen = lease.Liveness{ExpiresAt: w.srv.at.Add(rec.TTL() - time.Second), Rule: RuleServerDate}
	}
	// Slow rounds (or a TTL under the server rule's second) can leave a
	// confirmed write already lapsed.
	rec.Seen.Live = !b.clock.Now().After(rec.Seen.ExpiresAt)
	return rec
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
	pending := newAttempts()
	for round := 1; ; round++ {
		if pending.unknown >= maxUnknown {
			return fmt.Errorf("%w: %s: the outcome of %d journal appends is unknown", ErrUnreachable, b.loc, pending.unknown)
		}
		_, jtip, err := b.loadAll(ctx, nil, true)
		if err != nil {
			return err
		}
		if pending.writes[jtip] != nil {
			return nil // an append whose outcome was unknown landed
		}
		_, done, err := b.apply(ctx, "", tip{}, jtip, lease.Change{Op: lease.OpNone, Event: &e}, pending)
		if err != nil || done {
			return err
		}
		if round == maxRounds {
			return fmt.Errorf("gitstore: journal: gave up after %d conflicting appends", round)
		}
	}
}

// maxEvents bounds what Events reads of the journal, as the etcd store
// keeps its newest 10 000.
const maxEvents = 10000

// Events reads the journal's newest events, oldest first.
func (b *Backend) Events(ctx context.Context) ([]lease.Event, error) {
	ref := b.JournalRef()
	b.fetchMu.Lock()
	have, _, err := b.fetch(ctx, fullDepth, ref)
	b.fetchMu.Unlock()
	if err != nil || !have[ref] {
		return nil, err
	}
	// The newest maxEvents, oldest first (-n applies before --reverse).
	out, err := b.git(ctx, nil, "log", "-n", strconv.Itoa(maxEvents), "--reverse", "--format=%B%x00", scratchRef(ref))
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
