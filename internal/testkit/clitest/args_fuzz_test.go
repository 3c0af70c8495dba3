package clitest

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/durable-lease/durable-lease/internal/cli/leasecli"
	"github.com/durable-lease/durable-lease/internal/cli/poolcli"
)

// FuzzCLIArgs runs the lease and pool CLIs in-process on arbitrary
// command lines (one argument per line of the input): none panics, every
// exit status is one of 0-3, and unless help was asked for, stdout is
// exactly one JSON object, with ok false on every failure. With --shell it
// is export lines, or a comment and `false`.
func FuzzCLIArgs(f *testing.F) {
	for _, s := range []string{
		"lease\nacquire\n--kind\nk\n--owner\no\n--ttl\n1",
		"lease\nstatus\n--kind\nk",
		"lease\nacquire\n--kind\nk\n--owner\no\n--ttl\n1e999",
		"lease\nacquire\n--kind\nk\n--owner\no\n--ttl\n1\n--wait-ms\n99999999999999999999",
		"lease\nrelease\n--kind\n../../etc\n--force",
		"lease\nlist\n--pretty",
		"lease\nbogus",
		"pool\n--pool\npool.json\nstatus",
		"pool\n--pool\npool.json\nacquire\n--owner\no\n--shell\n--wait-ms\n$(touch x)",
		"pool\n--pool\npool.json\nacquire\n--owner\no\n--no-wait",
		"pool\n--pool\n/dev/zero\nstatus",
		"pool\nclaim\n--request\n../x\n--owner\no",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		args := strings.Split(input, "\n")
		if len(args) > 32 || strings.ContainsAny(input, "\x00") {
			return
		}
		dir := t.TempDir()
		t.Setenv("LEASE_STORE", dir+"/store")
		t.Setenv("LEASE_POOL_FILE", "")
		t.Setenv("LEASE_OWNER_PATTERN", "")
		var stdout, stderr bytes.Buffer
		var code int
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // nothing may wait: a wait ends at once as interrupted
		switch args[0] {
		case "lease":
			code = leasecli.Main(ctx, args[1:], &stdout, &stderr)
		case "pool":
			code = poolcli.Main(ctx, args[1:], &stdout, &stderr)
		default:
			return
		}
		if code < 0 || code > 3 {
			t.Fatalf("%q: exit %d", args, code)
		}
		help := false
		for _, a := range args {
			help = help || a == "--help" || a == "-h" || a == "help"
		}
		if help {
			return
		}
		out := stdout.String()
		if strings.HasPrefix(out, "# ") || strings.HasPrefix(out, "export ") {
			if code != 0 && !strings.HasSuffix(out, "\nfalse\n") {
				t.Fatalf("%q: failing --shell output does not end in false: %q", args, out)
			}
			return
		}
		var obj map[string]any
		dec := json.NewDecoder(strings.NewReader(out))
		if err := dec.Decode(&obj); err != nil || dec.More() || strings.Count(strings.TrimSpace(out), "\n") > 0 && !strings.Contains(input, "--pretty") {
			t.Fatalf("%q: stdout is not one JSON object: %q (%v)", args, out, err)
		}
		if ok, _ := obj["ok"].(bool); ok != (code == 0) {
			t.Fatalf("%q: ok %v with exit %d", args, obj["ok"], code)
		}
	})
}
