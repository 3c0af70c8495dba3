package lease

import (
	"regexp"
	"testing"
)

// FuzzNameValidation: the hand-written kind and default-owner checks
// accept exactly what their documented patterns accept.
func FuzzNameValidation(f *testing.F) {
	for _, s := range []string{"", "a", "A", "merge-baton", "slot-1", "0.a_b-c", "-x", ".x", "a b", "a/b", "../x",
		"user@host:1", "é", "a\x00", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"} {
		f.Add(s)
	}
	kind := regexp.MustCompile(KindPattern)
	owner := regexp.MustCompile(DefaultOwnerPattern)
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidKind(s), kind.MatchString(s); got != want {
			t.Fatalf("ValidKind(%q) = %v, KindPattern says %v", s, got, want)
		}
		if got, want := validDefaultOwner(s), owner.MatchString(s); got != want {
			t.Fatalf("validDefaultOwner(%q) = %v, DefaultOwnerPattern says %v", s, got, want)
		}
	})
}
