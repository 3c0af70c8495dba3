package doctest

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// bareTMPDIR is $TMPDIR expanded with no default: with TMPDIR unset, as
// on many a fresh machine, "$TMPDIR/team.git" is /team.git.
var bareTMPDIR = regexp.MustCompile(`\$TMPDIR\b|\$\{TMPDIR\}`)

// TestReadmeNeedsNoTMPDIR: the README's blocks run as pasted on a fresh
// machine, where TMPDIR may be unset, so none expands it without a
// default (mktemp needs none). TestDocs runs them with TMPDIR unset; this
// says which line is at fault without writing to / first.
func TestReadmeNeedsNoTMPDIR(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := Blocks(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if b.Runs() && bareTMPDIR.MatchString(b.Text) {
			t.Errorf("README.md:%d: the block expands %s, which is empty where TMPDIR is unset; use mktemp -d:\n%s",
				b.Line, bareTMPDIR.FindString(b.Text), b.Text)
		}
	}
}
