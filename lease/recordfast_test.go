package lease

import (
	"reflect"
	"strings"
	"testing"
)

// recordInputs are record files of many shapes, valid and not.
func recordInputs() []string {
	hb := `"2026-12-01T10:48:07.232Z"`
	base := `"v": 1, "kind": "k", "owner": "agent-7", "token": "5f0c", "heartbeat": ` + hb + `, "ttlMinutes": 15, "payload": null, "acquiredAt": ` + hb
	boot := `"boot": {"id": "96e8/1", "ms": 9634599, "at": ` + hb + `}`
	in := []string{
		`{` + base + `}`,
		`{` + base + `, ` + boot + `}`,
		"{\n  " + strings.ReplaceAll(base+`, `+boot, ", ", ",\n  ") + "\n}\n",
		`{` + base + `, "boot": {"id": "x", "ms": 1, "at": "2026-12-01T10:48:07.233Z"}}`,
		`{` + base + `, "boot": {"id": "", "ms": 1, "at": ` + hb + `}}`,
		`{` + base + `, "boot": {"id": "x", "ms": -1, "at": ` + hb + `}}`,
		`{` + base + `, "boot": {"id": "x", "ms": 1.5, "at": ` + hb + `}}`,
		`{` + base + `, "boot": {"ID": "x", "ms": 1, "at": ` + hb + `}}`,
		`{` + base + `, "boot": {"id": "x", "ms": 1, "at": ` + hb + `, "x": 1}}`,
		`{` + base + `, "boot": {"id": "x", "id": "y", "ms": 1, "at": ` + hb + `}}`,
		`{` + base + `, "boot": {"id": "x\u0041", "ms": 1, "at": ` + hb + `}}`,
		`{` + base + `, "boot": "other"}`,
		`{` + base + `, "boot": null}`,
		`{` + base + `, "zz": {"a": [1, 2, {"b": "\u00e9\n"}]}, "yy": [ ], "xx": true, "ww": -0.5e-3}`,
		`{` + base + `, "payload": {"pr": 123, "s": "<&>\u2028"}}`,
		`{` + base + `, "payload": "caf\u00e9 \xff"}`,
		`{` + base + `, "v": 2}`,
		`{` + base + `, "v": 1.0}`,
		`{` + base + `, "v": "1"}`,
		`{` + base + `, "v": null}`,
		`{` + base + `, "ttlMinutes": 0}`,
		`{` + base + `, "ttlMinutes": -1}`,
		`{` + base + `, "ttlMinutes": 1e400}`,
		`{` + base + `, "ttlMinutes": "15"}`,
		`{` + base + `, "owner": 7}`,
		`{` + base + `, "owner": null}`,
		`{` + base + `, "owner": "a\"b"}`,
		`{` + base + `, "token": "\u0074"}`,
		`{` + base + `, "heartbeat": "yesterday"}`,
		`{` + base + `, "heartbeat": 5}`,
		`{` + base + `, "heartbeat": "2026-12-01 10:48:07Z"}`,
		`{` + base + `, "acquiredAt": 5}`,
		`{` + base + `, "acquiredAt": "garbage"}`,
		`{"v":1,"heartbeat":` + hb + `,"ttlMinutes":1}`,
		`{"v":1,"ttlMinutes":1}`,
		`{"heartbeat":` + hb + `,"ttlMinutes":1}`,
		`{` + base + `} trailing`,
		`{` + base + `,}`,
		`{` + base + ` "x": 1}`,
		`{` + base + `, "x": 01}`,
		`{` + base + `, "x": 1.}`,
		`{` + base + `, "x": .5}`,
		`{` + base + `, "x": tru}`,
		`{` + base + `, "x": "ctl` + "\x01" + `"}`,
		`{` + base + `, "x": "bad \q escape"}`,
		`{` + base + `, "x": "\u12"}`,
		`{` + base + `, "k\u00e9y": 1}`,
		`{` + base + `, "k` + "\xc3\xa9" + `y": 1}`,
		`{` + base + `, "` + strings.Repeat("[", 150) + strings.Repeat("]", 150) + `": 1}`,
		`{` + base + `, "deep": ` + strings.Repeat("[", 150) + strings.Repeat("]", 150) + `}`,
		`{` + base + `, "deep": ` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
		``, `   `, `null`, `[]`, `{}`, `"s"`, `{"v":1`, "\ufeff{" + base + `}`,
	}
	return in
}

func TestDecodeRecordFastMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	fast := 0
	for _, in := range recordInputs() {
		want := decodeRecordSlow("k", []byte(in))
		got, ok := decodeRecordFast("k", []byte(in))
		if !ok {
			continue
		}
		fast++
		if !reflect.DeepEqual(got, want) {
			t.Errorf("decodeRecordFast(%q) =\n%+v\nwant\n%+v", in, got, want)
		}
	}
	if fast < 10 {
		t.Errorf("only %d of the inputs took the fast path", fast)
	}
	// The records this package writes always do.
	r := &Record{V: 1, Kind: "k", Owner: "o", Token: NewToken(), TTLMinutes: 1}
	now, boot := (&Store{opts: defaultOptions()}).instant()
	r.stamp(now, boot)
	r.AcquiredAt = r.Heartbeat
	data, err := r.EncodeFile()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := decodeRecordFast("k", data); !ok {
		t.Errorf("a record as written does not take the fast path:\n%s", data)
	}
}

func FuzzDecodeRecordFastMatchesEncodingJSON(f *testing.F) {
	for _, in := range recordInputs() {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, ok := decodeRecordFast("k", in)
		if !ok {
			return
		}
		if want := decodeRecordSlow("k", in); !reflect.DeepEqual(got, want) {
			t.Errorf("decodeRecordFast(%q) =\n%+v\nwant\n%+v", in, got, want)
		}
	})
}
