package poolcli

import (
	"reflect"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/durable-lease/durable-lease/internal/cli/cliparse/cliparsetest"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

// hotLines are the command lines a fresh process must read without
// building kong's model (see docs/PERFORMANCE.md).
var hotLines = [][]string{
	{"--pool", "pool.json", "acquire", "--owner", "o", "--ttl", "5", "--wait-ms", "1000"},
	{"acquire", "--owner", "o", "--shell", "--no-wait"},
	{"release", "--slot", "1", "--owner", "o", "--token", "t"},
	{"heartbeat", "--slot=db-2", "--owner=o", "--token=t"},
	{"--pool", "pool.json", "status", "--pretty"},
	{"claim", "--request", "r", "--owner", "o", "--shell"},
}

// quickVerbs are the verbs read the quick way; the others (request,
// waiter, enqueue) have default or enum tags and go to kong.
var quickVerbs = []string{"acquire", "claim", "heartbeat", "reset", "release", "reprovision", "health", "status", "pump", "history", "quarantine", "unquarantine", "version", "try-grant", "heartbeat-entry"}

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

// Every command line quick accepts, kong reads the same way: every flag
// of every verb, and many near misses of each.
func TestQuickParseIsKongParse(t *testing.T) {
	samples := cliparsetest.Samples(new(cli))
	var verbs []string
	for _, s := range samples[:len(samples)/2] {
		for _, w := range s {
			if !strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "x-") {
				verbs = append(verbs, w)
				break
			}
		}
	}
	if strings.Join(verbs, " ") != strings.Join(quickVerbs, " ") {
		t.Fatalf("quick reads the verbs %q, want %q", verbs, quickVerbs)
	}
	// Each line and its variants is a parallel subtest: building kong's
	// model for every variant is work for every core.
	for _, args := range append(samples, hotLines...) {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			accepted, err := cliparsetest.CompareWithKong(newGrammar, kong.Vars{}, args)
			if err != nil {
				t.Fatal(err)
			}
			if !accepted {
				t.Errorf("%q is not read the quick way", args)
			}
			for _, v := range cliparsetest.VariantsToCompare(args, testrun.Race) {
				if _, err := cliparsetest.CompareWithKong(newGrammar, kong.Vars{}, v); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func FuzzQuickParse(f *testing.F) {
	for _, args := range append(cliparsetest.Samples(new(cli)), hotLines...) {
		f.Add(strings.Join(args, "\n"))
	}
	f.Fuzz(func(t *testing.T, input string) {
		if _, err := cliparsetest.CompareWithKong(newGrammar, kong.Vars{}, strings.Split(input, "\n")); err != nil {
			t.Fatal(err)
		}
	})
}
