// Package cliparsetest checks, for each CLI's tests of its own grammar,
// that cliparse's quick parser reads a command line as kong does: the
// comparison, the sample command lines of a grammar and their variants.
// It is for tests only (no executable imports it).
package cliparsetest

import (
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
)

// CompareWithKong is for each CLI's tests of its own grammar: it parses
// args into one new grammar the quick way and into another with kong, and
// returns an error when the two disagree: quick accepted args but kong
// refused them or read them differently; quick answered with help where
// kong did not, or with another verb's; quick reported a mistake where
// kong read on (but for the mistakes quick alone refuses, a flag given
// twice and a word that is not UTF-8), or either answered a typo with a
// "did you mean" the other did not give. accepted says whether the quick way
// took args. Nothing is compared when the grammar has a shape quick does
// not read. Both read the process environment.
//
// The kong parse is the registered full parser: tests import package
// kongparse.
func CompareWithKong(newGrammar func() any, vars map[string]string, args []string) (accepted bool, err error) {
	quickGrammar := newGrammar()
	cmd, help, qerr := cliparse.Scan(quickGrammar, args)
	if errors.Is(qerr, cliparse.ErrUnreadable) {
		return false, nil
	}
	accepted = qerr == nil && !help
	kongGrammar := newGrammar()
	full := cliparse.Full()
	if full == nil {
		return accepted, fmt.Errorf("no full parser registered: import package kongparse")
	}
	var kongOut strings.Builder
	want, exited, _, err := full(kongGrammar, "test", "", vars, args, &kongOut, io.Discard)
	switch {
	case help:
		if !exited || !helpOf(kongOut.String(), cmd.Name) {
			return false, fmt.Errorf("%q: quick gave the help of %q, kong %v (exit request %v):\n%s", args, cmd.Name, err, exited, kongOut.String())
		}
		return false, nil
	case qerr != nil:
		switch {
		case cliparse.IsStricter(qerr):
			// kong reads on, to whatever end.
		case exited:
			return false, fmt.Errorf("%q: quick refused it (%v), kong printed help", args, qerr)
		case err == nil:
			return false, fmt.Errorf("%q: quick refused it (%v), kong read it", args, qerr)
		case suggests(qerr, err) && err.Error() != qerr.Error():
			// A typo is answered as kong answers it, "did you mean"
			// included, so that every CLI says the same.
			return false, fmt.Errorf("%q: quick said %q, kong %q", args, qerr, err)
		}
		return false, nil
	}
	if err != nil || exited {
		return true, fmt.Errorf("quick accepted %q, kong refused it (exit request %v): %v", args, exited, err)
	}
	if cmd.Name != want.Name {
		return true, fmt.Errorf("%q: quick selected verb %q, kong %q", args, cmd.Name, want.Name)
	}
	// quick leaves the verbs that were not selected zero.
	root, _ := cliparse.ShapeOf(reflect.TypeOf(kongGrammar).Elem())
	for _, v := range root.Verbs {
		if v.Name != want.Name {
			f := reflect.ValueOf(kongGrammar).Elem().FieldByIndex(v.Index)
			f.Set(reflect.Zero(f.Type()))
		}
	}
	if !same(reflect.ValueOf(quickGrammar), reflect.ValueOf(kongGrammar)) {
		return true, fmt.Errorf("%q: quick read %+v, kong %+v", args, quickGrammar, kongGrammar)
	}
	return true, nil
}

// suggests reports whether either parser answered with a "did you mean".
func suggests(errs ...error) bool {
	for _, err := range errs {
		if strings.Contains(err.Error(), ", did you mean ") {
			return true
		}
	}
	return false
}

// helpOf reports whether kong's help text out is verb's ("" for the
// root's): its usage line names the verb, or, for the root, no verb.
func helpOf(out, verb string) bool {
	line, _, _ := strings.Cut(out, "\n")
	rest, ok := strings.CutPrefix(line, "Usage: test")
	if !ok {
		return false
	}
	if verb == "" {
		return rest == "" || strings.HasPrefix(rest, " <") || strings.HasPrefix(rest, " [")
	}
	return rest == " "+verb || strings.HasPrefix(rest, " "+verb+" ")
}

// same is reflect.DeepEqual for the kinds a grammar quick accepts holds,
// except that floats are compared bit for bit, so NaN is the same as NaN.
func same(a, b reflect.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return same(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if !same(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !same(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Float32, reflect.Float64:
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	}
	return false // no other kind is in a grammar quick accepts
}

// Samples returns command lines that give every flag of every verb quick
// can read, and every root flag (before the verb and after it), a value
// of its type, once as --name value and once as --name=value. With
// CompareWithKong and Variants they check a grammar flag by flag.
func Samples(grammar any) [][]string {
	root, ok := cliparse.ShapeOf(reflect.TypeOf(grammar).Elem())
	if !ok {
		return nil
	}
	var out [][]string
	for _, inline := range []bool{false, true} {
		if len(root.Verbs) == 0 {
			line := sampleFlags(root.Flags, inline)
			if root.Passthrough {
				line = append(line, "--", "true", "--flag")
			}
			out = append(out, line)
			continue
		}
		for _, v := range root.Verbs {
			if !v.Readable {
				continue
			}
			half := len(root.Flags) / 2
			line := sampleFlags(root.Flags[:half], inline)
			line = append(line, v.Name)
			line = append(line, sampleFlags(v.Flags, inline)...)
			line = append(line, sampleFlags(root.Flags[half:], inline)...)
			out = append(out, line)
		}
	}
	return out
}

// sampleFlags gives each flag a value of its type.
func sampleFlags(flags []cliparse.FlagShape, inline bool) []string {
	var out []string
	for _, f := range flags {
		t := f.Type
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		var v string
		switch {
		case t == boolType:
			out = append(out, "--"+f.Name)
			continue
		case t == durationType:
			v = "1m30s"
		case t.Kind() == reflect.Int64:
			v = "42"
		case t.Kind() == reflect.Float64:
			v = "0.5"
		default:
			v = "x-" + f.Name
		}
		if inline {
			out = append(out, "--"+f.Name+"="+v)
		} else {
			out = append(out, "--"+f.Name, v)
		}
	}
	return out
}

// trickyWords are values and words on which a parser that is not kong
// would read something kong does not.
var trickyWords = []string{"", "-", "--", "-h", "--help", "-1", "=", "a=b", "0x1f", "0o17", "1_000", "1e999", "NaN", "-Inf", "1.5", "90", "1h", "ü", "\xff", "help", "--x=", "--no-wait"}

// Variants returns command lines near args: each word dropped, doubled,
// swapped with the next, or replaced by a tricky word, and each
// "--name value" pair joined as --name=value.
func Variants(args []string) [][]string {
	var out [][]string
	edit := func(f func(w []string) []string) {
		out = append(out, f(append([]string(nil), args...)))
	}
	for i := range args {
		edit(func(w []string) []string { return append(w[:i], w[i+1:]...) })
		edit(func(w []string) []string { return append(w[:i+1], w[i:]...) })
		if i+1 < len(args) {
			edit(func(w []string) []string { w[i], w[i+1] = w[i+1], w[i]; return w })
			if len(args[i]) > 2 && args[i][:2] == "--" {
				edit(func(w []string) []string { w[i] += "=" + w[i+1]; return append(w[:i+1], w[i+2:]...) })
			}
		}
		for _, t := range trickyWords {
			edit(func(w []string) []string { w[i] = t; return w })
		}
	}
	return out
}

// VariantsToCompare are the [Variants] of args a test compares: all of
// them, or in a test binary built with -race one in raceStride, since the
// race detector slows kong's parse of each tenfold and finds nothing in
// code that runs on one goroutine (every eighth cost the race suite 8 s
// of CPU in poolcli alone). .ci/run compares every variant without -race.
func VariantsToCompare(args []string, race bool) [][]string {
	const raceStride = 64
	all := Variants(args)
	if !race {
		return all
	}
	var some [][]string
	for i := len(args) % raceStride; i < len(all); i += raceStride {
		some = append(some, all[i])
	}
	return some
}

var (
	boolType     = reflect.TypeFor[bool]()
	durationType = reflect.TypeFor[time.Duration]()
)
