package leasecli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestHelpFromTheGeneratedText: every way of asking for help prints the
// generated text of the verb asked about (the root's without one), exit
// 0, nothing on stderr; help beats missing flags, as in kong. That the
// text is kong's is helpgen's test.
func TestHelpFromTheGeneratedText(t *testing.T) {
	for _, tt := range []struct {
		args  string
		topic string
	}{
		{"--help", ""},
		{"-h", ""},
		{"help", ""},
		{"--store /s --help", ""},
		{"--store list --help", ""}, // "list" is the store
		{"help acquire", "acquire"},
		{"acquire --help", "acquire"},
		{"--help acquire", "acquire"},
		{"acquire --kind k --help", "acquire"},
		{"release -h", "release"},
		{"list --pretty --help=1", "list"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(context.Background(), strings.Fields(tt.args), &stdout, &stderr)
		want, ok := embeddedHelp[tt.topic]
		if !ok || code != 0 || stdout.String() != want || stderr.Len() != 0 {
			t.Errorf("lease %s: exit %d, stderr %q, stdout %.40q; want the help of %q", tt.args, code, stderr.String(), stdout.String(), tt.topic)
		}
	}
	for _, args := range []string{"bogus --help", "help bogus", "help acquire status", "acquire --bogus --help", "acquire --kind --help"} {
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), strings.Fields(args), &stdout, &stderr); code != 2 || !strings.Contains(stdout.String(), `"code":"usage"`) {
			t.Errorf("lease %s: exit %d %s, want a usage error", args, code, stdout.String())
		}
	}
}
