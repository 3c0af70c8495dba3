// Package suggest finds the names a mistyped one was probably meant to be,
// by the rule kong uses for flags and commands, so that every CLI of the
// project and its pool files answer a typo with the same "did you mean".
package suggest

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Similar returns the candidates that start with needle or are at most
// two edits (Levenshtein) from it, in their order: kong's rule. With fold,
// case is ignored (pool-file keys: "TTLMinutes" finds "ttlMinutes").
func Similar(needle string, candidates []string, fold bool) []string {
	var out []string
	for _, c := range candidates {
		a, b := c, needle
		if fold {
			a, b = strings.ToLower(a), strings.ToLower(b)
		}
		if strings.HasPrefix(a, b) || distance(a, b) <= 2 {
			out = append(out, c)
		}
	}
	return out
}

// Phrase is kong's ending for msg: `msg, did you mean "x"?`, `msg, did
// you mean one of "x", "y"?`, or msg alone when matches is empty.
func Phrase(msg string, matches []string) string {
	quoted := make([]string, len(matches))
	for i, m := range matches {
		quoted[i] = strconv.Quote(m)
	}
	switch len(matches) {
	case 0:
		return msg
	case 1:
		return msg + ", did you mean " + quoted[0] + "?"
	}
	return msg + ", did you mean one of " + strings.Join(quoted, ", ") + "?"
}

// distance is the Levenshtein distance of a and b, in characters.
func distance(a, b string) int {
	f := make([]int, utf8.RuneCountInString(b)+1)
	for j := range f {
		f[j] = j
	}
	for _, ca := range a {
		j := 1
		prev := f[0] // f[j-1] of the row before
		f[0]++
		for _, cb := range b {
			best := min(f[j]+1, f[j-1]+1) // delete, insert
			if cb != ca {
				best = min(best, prev+1) // change
			} else {
				best = min(best, prev) // keep
			}
			prev, f[j] = f[j], best
			j++
		}
	}
	return f[len(f)-1]
}
