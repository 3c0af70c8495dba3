package cliparse

import "testing"

func TestQuickDerivesNames(t *testing.T) {
	for field, want := range map[string]string{"Store": "store", "OwnerPattern": "owner-pattern", "RevealTokens": "reveal-tokens", "TTL": "", "NoPty2": "", "HTTPServer": ""} {
		if got := (fieldTag{}).nameOr(field); got != want {
			t.Errorf("nameOr(%q) = %q, want %q", field, got, want)
		}
	}
}
