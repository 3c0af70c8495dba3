package leasecli

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
	"github.com/durable-lease/durable-lease/internal/cli/cliparse/cliparsetest"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	// The lease executable links no kong; its tests compare the quick
	// parser's reading with kong's.
	_ "github.com/durable-lease/durable-lease/internal/cli/cliparse/kongparse"
)

// hotLines are the command lines a fresh process must read without
// building kong's model (see docs/PERFORMANCE.md).
var hotLines = [][]string{
	{"--store", "/s", "acquire", "--kind", "k", "--owner", "o", "--ttl", "10"},
	{"acquire", "--kind", "k", "--owner", "o", "--ttl", "0.5", "--wait-ms", "1000", "--payload", `{"pr":1}`},
	{"release", "--kind", "k", "--owner", "o", "--token", "0123456789abcdef0123456789abcdef"},
	{"heartbeat", "--kind=k", "--owner=o", "--token=t", "--pretty"},
	{"status", "--kind", "k"},
	{"release", "--kind", "k", "--owner", "op", "--force"},
	{"list", "--reveal-tokens"},
	{"reconcile", "--owner-pattern", "^ci-.*$"},
}

func newGrammar() any { return new(cli) }

// Main runs the verb Parse returns as a verb: every one must be one.
func TestEveryCommandIsAVerb(t *testing.T) {
	typ := reflect.TypeFor[cli]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if _, ok := f.Tag.Lookup("cmd"); ok && !reflect.PointerTo(f.Type).Implements(reflect.TypeFor[verb]()) {
			t.Errorf("%s has no Run(*env) error", f.Name)
		}
	}
}

// Every command line quick accepts, kong reads the same way, and quick
// refuses or answers with help where kong does (see cliparsetest.CompareWithKong):
// every flag of every verb, and many near misses of each. The lease
// executable has no other parser: quick must read its whole grammar, so
// that it never fails with anything but a usage error.
func TestQuickParseIsKongParse(t *testing.T) {
	samples := cliparsetest.Samples(new(cli))
	if len(samples) != 2*8 {
		t.Fatalf("quick reads %d of the 8 verbs: %q", len(samples)/2, samples)
	}
	for _, args := range append(samples, hotLines...) {
		accepted, err := cliparsetest.CompareWithKong(newGrammar, helpVars(), args)
		if err != nil {
			t.Fatal(err)
		}
		if !accepted {
			t.Errorf("%q is not read the quick way", args)
		}
		for _, v := range cliparsetest.VariantsToCompare(args, testrun.Race) {
			if _, err := cliparsetest.CompareWithKong(newGrammar, helpVars(), v); err != nil {
				t.Fatal(err)
			}
			var c cli
			if _, _, err := cliparse.ParseAlone(&c, "lease", embeddedHelp, v, io.Discard); err != nil && !errors.Is(err, cliparse.ErrUsage) {
				t.Fatalf("%q: %v", v, err)
			}
		}
	}
}

func FuzzQuickParse(f *testing.F) {
	for _, args := range append(cliparsetest.Samples(new(cli)), hotLines...) {
		f.Add(strings.Join(args, "\n"))
	}
	f.Fuzz(func(t *testing.T, input string) {
		if _, err := cliparsetest.CompareWithKong(newGrammar, helpVars(), strings.Split(input, "\n")); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkParse reads an acquire's command line three ways, warm, in one
// process (docs/FAST-PATHS.md): as lease does (quick), with kong's model
// of the whole grammar (the straightforward way), and with kong's model
// of the named verb alone (an alternative measured and not taken).
func BenchmarkParse(b *testing.B) {
	args := hotLines[0]
	b.Run("quick", func(b *testing.B) {
		for b.Loop() {
			var c cli
			if _, exited, err := cliparse.ParseAlone(&c, "lease", embeddedHelp, args, io.Discard); err != nil || exited {
				b.Fatal(err)
			}
		}
	})
	b.Run("kong-whole", func(b *testing.B) {
		for b.Loop() {
			var c cli
			p, err := kong.New(&c, kong.Name("lease"), kong.Description(description), kong.Writers(io.Discard, io.Discard), kong.Vars(helpVars()),
				kong.ConfigureHelp(kong.HelpOptions{Compact: true, NoExpandSubcommands: true}))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.Parse(args); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kong-one-verb", func(b *testing.B) {
		for b.Loop() {
			var c cli
			p, err := kong.New(&c.globals, kong.DynamicCommand("acquire", "", "", &c.Acquire), kong.Writers(io.Discard, io.Discard), kong.Vars(helpVars()))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.Parse(args); err != nil {
				b.Fatal(err)
			}
		}
	})
}
