package gitstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

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
