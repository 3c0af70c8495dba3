package jsonfast

import (
	"bytes"
	"encoding/json"
	"math"
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

func TestAppendJSONFloatMatchesEncodingJSON(t *testing.T) {
	fs := []float64{0, 1, -1, 0.5, 0.001, 15, 1440, 527040, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 1.5e21, 123456789.125, math.SmallestNonzeroFloat64, math.MaxFloat64, math.Copysign(0, -1), 1.0 / 3}
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 2000; i++ {
		fs = append(fs, math.Float64frombits(r.Uint64()))
	}
	for _, f := range fs {
		got, ok := AppendFloat(nil, f)
		want, err := marshalPlain(f)
		if ok != (err == nil) || ok && !bytes.Equal(got, want) {
			t.Errorf("AppendFloat(%v) = %s, %v; want %s, %v", f, got, ok, want, err)
		}
	}
}

func TestIndentCompactMatchesJSONIndent(t *testing.T) {
	srcs := []string{`{}`, `[]`, `{"a":1}`, `{"a":{},"b":[],"c":[1,{"d":null}],"e":"x,y:{z}[\"]\\"}`, `"s"`, `1`, `[[[]]]`,
		`{"v":1,"kind":"k","owner":"o","token":"t","heartbeat":"2026-12-01T10:48:07.232Z","ttlMinutes":0.5,"payload":{"pr":123,"list":[1,2,{"x":"\u2028<>"}]},"acquiredAt":"2026-12-01T10:48:07.232Z","boot":{"id":"i","ms":3,"at":"a"},"zz":true}`}
	for _, s := range jsonStrings() {
		q, _ := json.Marshal(map[string]any{s: []any{s, map[string]any{}, []any{}}})
		srcs = append(srcs, string(q))
	}
	for _, src := range srcs {
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(src), "", "  "); err != nil {
			t.Fatalf("json.Indent(%s): %v", src, err)
		}
		got, ok := IndentCompact(nil, []byte(src))
		if !ok || !bytes.Equal(got, want.Bytes()) {
			t.Errorf("IndentCompact(%s) = %s, %v; want %s", src, got, ok, want.Bytes())
		}
	}
	for _, bad := range []string{`{`, `}`, `{"a":"b}`, `[{]`} {
		if _, ok := IndentCompact(nil, []byte(bad)); ok && bad != `[{]` {
			t.Errorf("IndentCompact(%s) ok", bad)
		}
	}
}
