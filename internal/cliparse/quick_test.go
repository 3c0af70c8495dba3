package cliparse_test

import (
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/cliparse"
	_ "github.com/durable-lease/durable-lease/internal/cliparse/kongparse"
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
	accepted, err := cliparse.CompareWithKong(newGrammar, testVars, args)
	if err != nil {
		t.Fatal(err)
	}
	return accepted
}

func TestQuickReadsWhatKongReads(t *testing.T) {
	root := func() any { return new(testRoot) }
	run := func() any { return new(testRun) }
	hooked := func() any { return new(testHooked) }
	for _, tc := range []struct {
		name     string
		grammar  func() any
		args     string
		env      map[string]string
		accepted bool
	}{
		{"flags around the verb", root, "--store s take --owner o --verbose --zone z", nil, true},
		{"inline values", root, "take --owner=o --payload={\"a\":1} --ttl=0.5 --poll-ms=0x10", nil, true},
		{"every type", root, "take --owner o --wait-ms 7 --every 1m --grace 2s --ratio 1e3 --force --ttl 1_0", nil, true},
		{"an empty inline value", root, "take --owner= --payload=", nil, true},
		{"a dash after =", root, "take --owner=-o --ratio=-1", nil, true},
		{"named verb", root, "give-back --owner o", nil, true},
		{"hidden verb", root, "hidden --note n", nil, true},
		{"env defaults", root, "take --owner o", map[string]string{"QUICK_TEST_STORE": "e", "QUICK_TEST_TTL": "2", "QUICK_TEST_POLL": "9", "QUICK_TEST_ZONE": ""}, true},
		{"flag beats env", root, "--store f take --owner o --ttl 3", map[string]string{"QUICK_TEST_STORE": "e", "QUICK_TEST_TTL": "2"}, true},
		{"env satisfies required", root, "give-back", map[string]string{"QUICK_TEST_OWNER": "o"}, true},
		{"passthrough after --", run, "--kind k -- sh -c 'x' --kind", nil, true},
		{"passthrough without --", run, "--no-pty true --kind k", nil, true},
		{"nothing to run", run, "--kind k", nil, true},
		{"only --", run, "--kind k --", nil, true},

		{"env that does not convert", root, "take --owner o", map[string]string{"QUICK_TEST_TTL": "soon"}, false},
		{"no verb", root, "--store s", nil, false},
		{"unknown verb", root, "tak --owner o", nil, false},
		{"verb flag before the verb", root, "--owner o take", nil, false},
		{"missing required", root, "take", nil, false},
		{"flag twice", root, "take --owner o --owner p", nil, false},
		{"value missing", root, "take --owner", nil, false},
		{"dash value", root, "take --owner -o", nil, false},
		{"short flag", root, "take -h --owner o", nil, false},
		{"help", root, "take --owner o --help", nil, false},
		{"bool with a value", root, "take --owner o --force=true", nil, false},
		{"bad number", root, "take --owner o --wait-ms 1.5", nil, false},
		{"extra word", root, "take --owner o extra", nil, false},
		{"separator", root, "take --owner o --", nil, false},
		{"default tag", root, "dflt --mode a", nil, false},
		{"hook", hooked, "take --owner o", nil, false},
		{"not UTF-8", root, "take --owner \xff", nil, false},
		{"not UTF-8 in a command", run, "-- echo \xff", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if got := check(t, tc.grammar, strings.Fields(tc.args)); got != tc.accepted {
				t.Errorf("accepted = %v, want %v", got, tc.accepted)
			}
		})
	}
}

func TestQuickNearMisses(t *testing.T) {
	for _, g := range []func() any{func() any { return new(testRoot) }, func() any { return new(testRun) }} {
		samples := cliparse.Samples(g())
		if len(samples) == 0 {
			t.Fatalf("no samples for %T", g())
		}
		for _, s := range samples {
			if !check(t, g, s) {
				t.Errorf("sample %q declined", s)
			}
			for _, v := range cliparse.Variants(s) {
				check(t, g, v)
			}
		}
	}
}

func FuzzQuick(f *testing.F) {
	for _, s := range cliparse.Samples(new(testRoot)) {
		f.Add(strings.Join(s, "\n"))
	}
	f.Add("--kind\nk\n--\ntrue")
	f.Fuzz(func(t *testing.T, input string) {
		args := strings.Split(input, "\n")
		check(t, func() any { return new(testRoot) }, args)
		check(t, func() any { return new(testRun) }, args)
	})
}
