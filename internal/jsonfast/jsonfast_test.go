package jsonfast

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// marshalPlain is json.Marshal without HTML escaping, as a record's
// fields are written.
func marshalPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// jsonStrings are strings that exercise every escape of encoding/json.
func jsonStrings() []string {
	s := []string{"", "a", "agent-7", `"quoted"`, `back\slash`, "<tag>&amp;", "line\nbreak\r\t\b\f", "\x00\x01\x1f\x7f",
		"caf\u00e9", "\u2028\u2029", "bad \xff utf8 \xc3", "emoji \U0001F600", "mixed <\u2028\xfe\"\\>"}
	for c := 0; c < 256; c++ {
		s = append(s, string([]byte{byte(c)}), "x"+string([]byte{byte(c)})+"y")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for n := 0; n < 500; n++ {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		s = append(s, string(b))
	}
	return s
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonStrings() {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s, true); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q, html) = %s, want %s", s, got, want)
		}
		if got, want := AppendString(nil, s, false), mustPlain(t, s); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
}

func mustPlain(t *testing.T, v any) []byte {
	t.Helper()
	b, err := marshalPlain(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
