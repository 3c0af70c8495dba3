package doctest

import (
	"reflect"
	"strings"
	"testing"
)

func TestBlocks(t *testing.T) {
	t.Parallel()
	doc := strings.Join([]string{
		"# Title",                              // 1
		"```sh",                                // 2
		"echo a",                               // 3
		"```",                                  // 4
		"<!-- doctest: norun: needs a tty -->", // 5
		"```sh",                                // 6
		"pool top",                             // 7
		"```",                                  // 8
		"- a list item:",                       // 9
		"",                                     // 10
		"  <!-- doctest: etcd 127.0.0.1:2379 -->", // 11
		"  ```sh", // 12
		"  export LEASE_STORE=etcd://127.0.0.1:2379/x", // 13
		"    indented more",                            // 14
		"  ```",                                        // 15
		"<!-- doctest: file examples/pool/gate.yaml -->", // 16
		"````yaml", // 17
		"```",      // 18
		"````",     // 19
		"```json",  // 20
		"{}",       // 21
		"```",      // 22
	}, "\n") + "\n"
	got, err := Blocks(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{Line: 2, Info: "sh", Text: "echo a\n"},
		{Line: 6, Info: "sh", Mark: Mark{"norun", "needs a tty"}, Text: "pool top\n"},
		{Line: 12, Info: "sh", Mark: Mark{"etcd", "127.0.0.1:2379"}, Text: "export LEASE_STORE=etcd://127.0.0.1:2379/x\n  indented more\n"},
		{Line: 17, Info: "yaml", Mark: Mark{"file", "examples/pool/gate.yaml"}, Text: "```\n"},
		{Line: 20, Info: "json", Text: "{}\n"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Blocks =\n%+v\nwant\n%+v", got, want)
	}
	var runs []int
	for _, b := range got {
		if b.Runs() {
			runs = append(runs, b.Line)
		}
	}
	if !reflect.DeepEqual(runs, []int{2, 12}) {
		t.Errorf("blocks that run: %v, want lines 2 and 12", runs)
	}
}

func TestBlocksErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, doc, want string }{
		{"unknown mark", "<!-- doctest: skip -->\n```sh\nx\n```\n", `unknown doctest mark "skip"`},
		{"norun without a reason", "<!-- doctest: norun -->\n```sh\nx\n```\n", "norun needs a reason"},
		{"etcd without an address", "<!-- doctest: etcd -->\n```sh\nx\n```\n", "etcd needs the address"},
		{"mark not before a fence", "<!-- doctest: norun: x -->\ntext\n```sh\nx\n```\n", "line 1: a doctest mark not followed by a fence"},
		{"mark with a blank line", "<!-- doctest: norun: x -->\n\n```sh\nx\n```\n", "line 1: a doctest mark not followed by a fence"},
		{"mark at the end", "text\n<!-- doctest: norun: x -->\n", "line 2: a doctest mark not followed by a fence"},
		{"unclosed fence", "```sh\nx\n", "line 1: a fence that is never closed"},
		{"mark on two lines", "<!-- doctest: norun: x\n-->\n```sh\nx\n```\n", "one line ending in -->"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Blocks(tt.doc)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Blocks = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
