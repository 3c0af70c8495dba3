package pool

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ShellQuote quotes s for a POSIX shell: single quotes, with each single
// quote written as '"'"' (close, a double-quoted quote, reopen). Nothing
// inside single quotes is expanded, so the result is safe to eval whatever s
// holds ($(…), backticks, newlines). The usual form with a backslash-escaped
// quote is avoided because mvdan.cc/sh keeps that backslash in an assignment.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// GrantExports renders g as ShellExports does, followed by
// <prefix>_FENCE when the grant has a fence.
func GrantExports(g *Grant, prefix string) (string, error) {
	text, err := ShellExports(g.Env, prefix, fmt.Sprint(g.Slot), g.Token, g.Owner)
	if err != nil || g.Fence <= 0 {
		return text, err
	}
	return text + "export " + prefix + "_FENCE=" + ShellQuote(strconv.FormatInt(g.Fence, 10)) + "\n", nil
}

// ShellExports renders a grant as `export NAME='value'` lines: the grant
// env sorted by name, then <prefix>_SLOT, <prefix>_TOKEN and <prefix>_OWNER.
// A value holding a NUL byte cannot be an environment variable and is an
// error.
func ShellExports(env map[string]string, prefix, slot, token, owner string) (string, error) {
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	line := func(name, value string) error {
		if !envNamePattern().MatchString(name) {
			return fmt.Errorf("%w: %q is not a valid environment variable name", ErrConfig, name)
		}
		if strings.ContainsRune(value, 0) {
			return fmt.Errorf("%w: the value of %s holds a NUL byte", ErrConfig, name)
		}
		fmt.Fprintf(&b, "export %s=%s\n", name, ShellQuote(value))
		return nil
	}
	for _, k := range names {
		if err := line(k, env[k]); err != nil {
			return "", err
		}
	}
	for _, kv := range [][2]string{{prefix + "_SLOT", slot}, {prefix + "_TOKEN", token}, {prefix + "_OWNER", owner}} {
		if err := line(kv[0], kv[1]); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}
