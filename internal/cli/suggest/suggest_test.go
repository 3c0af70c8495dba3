package suggest

import (
	"strings"
	"testing"
)

func TestSimilar(t *testing.T) {
	flags := []string{"--help", "-h", "--store", "--owner-pattern", "--pretty", "--kind", "--owner", "--ttl", "--payload", "--wait-ms"}
	for _, tc := range []struct {
		needle string
		fold   bool
		want   string
	}{
		{"--ownr", false, "--owner"},
		{"--own", false, "--owner-pattern --owner"},
		{"--kin", false, "--kind"},
		{"--wait", false, "--wait-ms"},
		{"--zzzzzz", false, ""},
		{"--p", false, "-h --pretty --payload"}, // as kong: -h is two edits from --p
	} {
		if got := strings.Join(Similar(tc.needle, flags, tc.fold), " "); got != tc.want {
			t.Errorf("Similar(%q) = %q, want %q", tc.needle, got, tc.want)
		}
	}
	keys := []string{"name", "ttlMinutes", "waiterStaleMs", "slots", "store"}
	for needle, want := range map[string]string{"ttlMinute": "ttlMinutes", "TTLMinutes": "ttlMinutes", "slot": "slots", "stor": "store", "provisoin": ""} {
		if got := strings.Join(Similar(needle, keys, true), " "); got != want {
			t.Errorf("Similar(%q, fold) = %q, want %q", needle, got, want)
		}
	}
}

func TestPhrase(t *testing.T) {
	for _, tc := range []struct {
		matches []string
		want    string
	}{
		{nil, "unknown flag --x"},
		{[]string{"--owner"}, `unknown flag --x, did you mean "--owner"?`},
		{[]string{"--a", "--b"}, `unknown flag --x, did you mean one of "--a", "--b"?`},
	} {
		if got := Phrase("unknown flag --x", tc.matches); got != tc.want {
			t.Errorf("Phrase(%q) = %q, want %q", tc.matches, got, tc.want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"ü", "u", 1}, {"--owner", "--ownr", 1}} {
		if got := distance(tc.a, tc.b); got != tc.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
