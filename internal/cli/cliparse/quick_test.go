package cliparse_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
	"github.com/durable-lease/durable-lease/internal/cli/cliparse/cliparsetest"
	_ "github.com/durable-lease/durable-lease/internal/cli/cliparse/kongparse"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

// A grammar with every shape quick reads, and some it leaves to kong.
type testRoot struct {
	testShared
	Verbose bool   `help:"More."`
	Zone    string `env:"QUICK_TEST_ZONE" placeholder:"Z" help:"A zone."`

	Take   testTake    `cmd:"" help:"Take."`
	Give   testGive    `cmd:"" name:"give-back" help:"Give."`
	Hidden testHidden  `cmd:"" hidden:"" help:"Hidden."`
	Dflt   testDefault `cmd:"" help:"Has a default."`
}

type testShared struct {
	Store string `env:"QUICK_TEST_STORE" help:"Where."`
}

type testWait struct {
	Poll int64    `name:"poll-ms" env:"QUICK_TEST_POLL" help:"Poll."`
	TTL  *float64 `name:"ttl" env:"QUICK_TEST_TTL" help:"TTL ${x}."`
}

type testTake struct {
	Owner   string  `required:"" help:"Who."`
	Payload *string `help:"JSON."`
	testWait
	Wait  *int64         `name:"wait-ms" help:"Wait."`
	Every *time.Duration `help:"Every."`
	Grace time.Duration  `name:"grace" help:"Grace."`
	Ratio float64        `help:"Ratio."`
	Force bool           `help:"Force."`
}

type testGive struct {
	Owner string `required:"" env:"QUICK_TEST_OWNER" help:"Who."`
}

type testHidden struct{ Note string }

type testDefault struct {
	Mode string `default:"a" enum:"a,b"`
}

type testRun struct {
	Kind    *string  `help:"Kind."`
	NoPty   bool     `name:"no-pty"`
	Command []string `arg:"" optional:"" passthrough:"partial" help:"Command."`
}

type testHooked struct {
	Take testTake `cmd:""`
}

func (*testHooked) AfterApply() error { return nil }

var testVars = map[string]string{"x": "y"}

func check(t *testing.T, newGrammar func() any, args []string) bool {
	t.Helper()
	accepted, err := cliparsetest.CompareWithKong(newGrammar, testVars, args)
	if err != nil {
		t.Fatal(err)
	}
	return accepted
}

// TestQuickReadsWhatKongReads: what quick makes of a command line (read
// it, help, or the mistake it reports), which kong makes of it too
// (check compares the two).
func TestQuickReadsWhatKongReads(t *testing.T) {
	root := func() any { return new(testRoot) }
	run := func() any { return new(testRun) }
	hooked := func() any { return new(testHooked) }
	const read, unreadable = "", "(unreadable)"
	for _, tc := range []struct {
		name    string
		grammar func() any
		args    string
		env     map[string]string
		want    string // read, "help VERB", unreadable, or the error
	}{
		{"flags around the verb", root, "--store s take --owner o --verbose --zone z", nil, read},
		{"inline values", root, "take --owner=o --payload={\"a\":1} --ttl=0.5 --poll-ms=0x10", nil, read},
		{"every type", root, "take --owner o --wait-ms 7 --every 1m --grace 2s --ratio 1e3 --force --ttl 1_0", nil, read},
		{"an empty inline value", root, "take --owner= --payload=", nil, read},
		{"a dash after =", root, "take --owner=-o --ratio=-1", nil, read},
		{"a dash as a value", root, "take --owner -", nil, read},
		{"named verb", root, "give-back --owner o", nil, read},
		{"hidden verb", root, "hidden --note n", nil, read},
		{"env defaults", root, "take --owner o", map[string]string{"QUICK_TEST_STORE": "e", "QUICK_TEST_TTL": "2", "QUICK_TEST_POLL": "9", "QUICK_TEST_ZONE": ""}, read},
		{"flag beats env", root, "--store f take --owner o --ttl 3", map[string]string{"QUICK_TEST_STORE": "e", "QUICK_TEST_TTL": "2"}, read},
		{"env satisfies required", root, "give-back", map[string]string{"QUICK_TEST_OWNER": "o"}, read},
		{"bool with a value", root, "take --owner o --force=false --verbose=yes", nil, read},
		{"separator", root, "take --owner o --", nil, read},
		{"passthrough after --", run, "--kind k -- sh -c 'x' --kind", nil, read},
		{"passthrough without --", run, "--no-pty true --kind k", nil, read},
		{"nothing to run", run, "--kind k", nil, read},
		{"only --", run, "--kind k --", nil, read},

		{"help", root, "take --owner o --help", nil, "help take"},
		{"short help", root, "-h", nil, "help "},
		{"help before the verb", root, "--help give-back", nil, "help give-back"},
		{"help beats missing flags", root, "take -h", nil, "help take"},
		{"help beats a flag given twice", root, "take --owner o --owner p -h", nil, "help take"},
		{"a mistake after a flag given twice", root, "take --owner o --owner p --bogus", nil, "unknown flag --bogus"},
		{"help of a command runner", run, "--help", nil, "help "},

		{"env that does not convert", root, "take --owner o", map[string]string{"QUICK_TEST_TTL": "soon"}, `$QUICK_TEST_TTL (the default of --ttl): expected a number but got "soon"`},
		{"no verb", root, "--store s", nil, `expected one of "take", "give-back", "dflt"`},
		{"unknown verb", root, "tak --owner o", nil, `unexpected argument tak, did you mean "take"?`},
		{"a word like no verb", root, "zzz --owner o", nil, "unexpected argument zzz"},
		{"verb flag before the verb", root, "--owner o take", nil, "unknown flag --owner"},
		{"a flag like no flag", root, "take --zzzzzz", nil, "unknown flag --zzzzzz"},
		{"missing required", root, "take", nil, "missing flags: --owner=STRING"},
		{"flag twice", root, "take --owner o --owner p", nil, "--owner is given twice: give each flag once"},
		{"value missing", root, "take --owner", nil, "--owner: expected a value after it"},
		{"dash value", root, "take --owner -o", nil, `--owner: expected a value but got "-o", which reads as a flag; to give it as the value, write --owner=-o`},
		{"short flag", root, "take -x --owner o", nil, `unknown flag -x, did you mean "-h"?`},
		{"a mistyped flag", root, "take --ownr o", nil, `unknown flag --ownr, did you mean "--owner"?`},
		{"a flag two flags start with", root, "take --o x", nil, `unknown flag --o, did you mean one of "-h", "--owner"?`},
		{"a mistyped root flag", root, "--stor x take", nil, `unknown flag --stor, did you mean "--store"?`},
		{"mistake before help", root, "take --bogus --help", nil, "unknown flag --bogus"},
		{"bool with a bad value", root, "take --owner o --force=maybe", nil, `--force: expected true, 1, yes, false, 0 or no but got "maybe"`},
		{"bad number", root, "take --owner o --wait-ms 1.5", nil, `--wait-ms: expected a whole number (of at most 19 digits) but got "1.5"`},
		{"bad duration", root, "take --owner o --grace soon", nil, `--grace: expected a duration such as 90s or 1h30m but got "soon"`},
		{"extra word", root, "take --owner o extra", nil, "unexpected argument extra"},
		{"a word after --", root, "take --owner o -- x", nil, "unexpected argument x"},
		{"not UTF-8", root, "take --owner \xff", nil, `argument 3 is not valid UTF-8: "\xff"`},
		{"not UTF-8 in a command", run, "-- echo \xff", nil, `argument 3 is not valid UTF-8: "\xff"`},
		{"default tag", root, "dflt --mode a", nil, unreadable},
		{"hook", hooked, "take --owner o", nil, unreadable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := strings.Fields(tc.args)
			accepted := check(t, tc.grammar, args)
			cmd, help, err := cliparse.Scan(tc.grammar(), args)
			got := read
			switch {
			case errors.Is(err, cliparse.ErrUnreadable):
				got = unreadable
			case err != nil:
				got = err.Error()
				if !errors.Is(err, cliparse.ErrUsage) {
					t.Errorf("%v is no usage error", err)
				}
			case help:
				got = "help " + cmd.Name
			}
			if got != tc.want || accepted != (tc.want == read) {
				t.Errorf("got %q (accepted %v), want %q", got, accepted, tc.want)
			}
		})
	}
}

func TestQuickNearMisses(t *testing.T) {
	for _, g := range []func() any{func() any { return new(testRoot) }, func() any { return new(testRun) }} {
		samples := cliparsetest.Samples(g())
		if len(samples) == 0 {
			t.Fatalf("no samples for %T", g())
		}
		for _, s := range samples {
			if !check(t, g, s) {
				t.Errorf("sample %q declined", s)
			}
			for _, v := range cliparsetest.VariantsToCompare(s, testrun.Race) {
				check(t, g, v)
			}
		}
	}
}

func FuzzQuick(f *testing.F) {
	for _, s := range cliparsetest.Samples(new(testRoot)) {
		f.Add(strings.Join(s, "\n"))
	}
	f.Add("--kind\nk\n--\ntrue")
	f.Fuzz(func(t *testing.T, input string) {
		args := strings.Split(input, "\n")
		check(t, func() any { return new(testRoot) }, args)
		check(t, func() any { return new(testRun) }, args)
	})
}

// TestHelpHintNamesTheVerb: a usage error points at the help of the verb
// the command line names, found as the parser finds it (past the root's
// flags and their values, and past a mistyped flag's value), else at the
// root's.
func TestHelpHintNamesTheVerb(t *testing.T) {
	for args, want := range map[string]string{
		"take --ownr o":                 "test take",
		"--store s give-back --bogus":   "test give-back",
		"--store=s take":                "test take",
		"--verbose take":                "test take",
		"--stor s take":                 "test take",
		"--bogus take":                  "test take",
		"tak --owner o":                 "test",
		"--store take give-back":        "test give-back", // "take" is the store
		"-- take":                       "test",
		"":                              "test",
		"--zone z --stor s --owner o x": "test",
	} {
		if got := cliparse.HelpHint(new(testRoot), "test", strings.Fields(args)); got != "Run '"+want+" --help' for usage." {
			t.Errorf("%q: %s, want the help of %q", args, got, want)
		}
	}
	if got := cliparse.HelpHint(new(testRun), "test", []string{"--kind", "k", "take"}); got != "Run 'test --help' for usage." {
		t.Errorf("a grammar without verbs: %s", got)
	}
}
