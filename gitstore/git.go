package gitstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// CallTimeout bounds every git invocation: a remote that does not answer
// within it is [ErrUnreachable].
const CallTimeout = 20 * time.Second

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
	timeout bool // ended by its context: CallTimeout, or the caller's
	cut     bool // by the caller's context (a holder's deadline), not CallTimeout
	bound   time.Duration
	err     error
}

func (e *gitError) Error() string {
	switch {
	case e.cut:
		return fmt.Sprintf("git %s: cut short by the caller's deadline or cancellation", e.args)
	case e.timeout:
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
func (b *Backend) git(parent context.Context, stdin []byte, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(parent, b.timeout)
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
		return out.Bytes(), &gitError{args: name, stderr: redact(errb.String()), timeout: ctx.Err() != nil, cut: parent.Err() != nil, bound: b.timeout, err: err}
	}
	return out.Bytes(), nil
}

func (b *Backend) unreachable(what string, err error) error {
	return fmt.Errorf("%w: %s: %s: %v", ErrUnreachable, b.loc, what, err)
}

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
