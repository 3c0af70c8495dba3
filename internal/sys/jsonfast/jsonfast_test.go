package jsonfast_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/durable-lease/durable-lease/internal/sys/jsonfast"
	"github.com/durable-lease/durable-lease/internal/testkit/storetest"
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

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range storetest.JSONStrings() {
		want, _ := json.Marshal(s)
		if got := jsonfast.AppendString(nil, s, true); !bytes.Equal(got, want) {
			t.Errorf("jsonfast.AppendString(%q, html) = %s, want %s", s, got, want)
		}
		if got, want := jsonfast.AppendString(nil, s, false), mustPlain(t, s); !bytes.Equal(got, want) {
			t.Errorf("jsonfast.AppendString(%q) = %s, want %s", s, got, want)
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
