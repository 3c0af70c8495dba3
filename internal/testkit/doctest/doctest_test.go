package doctest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
)

// notRun are the documents whose blocks the test leaves alone, and why.
var notRun = map[string]string{
	"docs/PERFORMANCE-LOG.md": "the log of past rounds: its commands are benchmarks of minutes, kept as they were run",
	"docs/RELIABILITY.md":     "its commands are the torture profiles, minutes each, run by .ci/run and by hand",
}

// documents are README.md and docs/*.md, less notRun.
func documents(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"README.md"}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		if _, skip := notRun[filepath.ToSlash(rel)]; !skip {
			names = append(names, filepath.ToSlash(rel))
		}
	}
	sort.Strings(names[1:])
	return names
}

// TestDocs runs every shell block of README.md and docs/ as pasted (see
// the package doc for the marks), each document in a clean copy of the
// checkout with the commands installed from it.
func TestDocs(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/bin/bash"); err != nil {
		if _, err := os.Stat("/usr/bin/bash"); err != nil {
			t.Fatal("the blocks are bash; install bash")
		}
	}
	for _, tool := range []string{"jq", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the blocks use %s, as a reader of the docs does: install it", tool)
		}
	}
	s := installedSession(t)
	var (
		etcdOnce sync.Once
		endpoint string
	)
	etcd := func() string {
		// One member for every document that needs it, started on first
		// use: embedded, or ETCDTEST_BINARY's.
		etcdOnce.Do(func() { endpoint = etcdtest.Start(t).Members[0].Endpoint })
		return endpoint
	}
	for _, name := range documents(t, s.root) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			doc, err := os.ReadFile(filepath.Join(s.root, name))
			if err != nil {
				t.Fatal(err)
			}
			blocks, err := Blocks(string(doc))
			if err != nil {
				t.Fatalf("%s:%v", name, err)
			}
			ran, shown := 0, 0
			for _, b := range blocks {
				switch {
				case b.Runs():
					ran++
				case b.Info == "sh":
					shown++
					t.Logf("%s:%d: not run: %s", name, b.Line, b.Mark.Arg)
				}
			}
			if err := s.runDoc(t, name, string(doc), etcd); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d blocks ran, %d shown only", name, ran, shown)
		})
	}
}

// TestFailingBlockFails: a block that fails fails the document, naming the
// block and its output, and the blocks after it never run.
func TestFailingBlockFails(t *testing.T) {
	t.Parallel()
	s := newSession(t, "")
	doc := "# A\n\n```sh\nx=one\necho \"$x\"\n```\n\ntext\n\n```sh\necho \"two after $x\"\nfalse\necho unreached\n```\n\n```sh\necho never\n```\n"
	err := s.runDoc(t, "broken.md", doc, nil)
	var be *blockError
	if !errors.As(err, &be) {
		t.Fatalf("runDoc = %v, want a failed block", err)
	}
	if be.block.Line != 10 || !strings.Contains(be.output, "two after one") || strings.Contains(be.output, "unreached") || strings.Contains(be.output, "never") {
		t.Errorf("failed block at line %d with output %q; want line 10, its own output only", be.block.Line, be.output)
	}
	if !strings.Contains(err.Error(), "broken.md:10: the block failed") {
		t.Errorf("error %q does not name the document and line", err)
	}
}

// TestHeldLeaseFails: a document whose blocks leave a lease held fails,
// though every block passed.
func TestHeldLeaseFails(t *testing.T) {
	t.Parallel()
	s := installedSession(t)
	doc := "```sh\nlease acquire --kind left-behind --owner doc --ttl 5\n```\n"
	err := s.runDoc(t, "leaky.md", doc, nil)
	if err == nil || !strings.Contains(err.Error(), "left left-behind held by doc") {
		t.Fatalf("runDoc = %v, want the lease left held named", err)
	}
}

// TestFileMarkMismatch: a block marked as a copy of a file must be that
// file, byte for byte.
func TestFileMarkMismatch(t *testing.T) {
	t.Parallel()
	s := newSession(t, "")
	doc := "<!-- doctest: file examples/pool/gate.yaml -->\n```yaml\npool: pool.json\n```\n"
	err := s.runDoc(t, "stale.md", doc, nil)
	if err == nil || !strings.Contains(err.Error(), "stale.md:2: the block is not examples/pool/gate.yaml") {
		t.Fatalf("runDoc = %v, want the stale copy refused", err)
	}
}
