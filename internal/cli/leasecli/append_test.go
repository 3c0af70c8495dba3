package leasecli

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/cli/outcome"
	"github.com/durable-lease/durable-lease/lease"
)

// encoded is what outcome.Write printed before outputs wrote themselves.
func encoded(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestAppendJSONMatchesTheEncoder(t *testing.T) {
	hb := time.Date(2026, 12, 1, 10, 48, 7, 232e6, time.UTC)
	recs := []*lease.Record{
		nil,
		{V: 1, Kind: "k", Owner: "agent-7", Token: "5f0c", Heartbeat: hb, TTLMinutes: 15, AcquiredAt: hb, Fence: 3},
		{V: 1, Kind: "k", Owner: "<o&>", Token: "t\u2028", Heartbeat: hb, TTLMinutes: 0.5, AcquiredAt: hb, Payload: json.RawMessage(`{"pr": 123, "x":[1, 2], "h":"<&>"}`), Boot: &lease.BootStamp{ID: "id/1", Ms: 99}},
		lease.DecodeRecord("k", []byte(`not json <&>`)),
		lease.DecodeRecord("k", []byte(`{"v":1,"owner":"o","token":"t","heartbeat":"2026-12-01T10:48:07.232Z","ttlMinutes":1,"extra":{"a":[1, {}]}}`)),
	}
	var outs []any
	for _, r := range recs {
		for _, s := range []string{"k", "odd\"kind", "caf\u00e9"} {
			outs = append(outs,
				acquireOut{OK: true, Code: "acquired", Kind: s, Record: r, Fence: 7, ExpiresAt: "2026-12-01T10:58:07.232Z"},
				acquireOut{OK: true, Code: "acquired", Kind: s, Record: r, ExpiresAt: s, TookOverExpired: true, Previous: r},
				releaseOut{OK: true, Code: "released", Kind: s, Released: true, WasExpired: true},
				releaseOut{OK: true, Code: "not_held", Kind: s, Forced: true, Previous: r},
			)
		}
	}
	fast := 0
	for _, o := range outs {
		var got bytes.Buffer
		if err := outcome.Write(&got, o, false); err != nil {
			t.Fatal(err)
		}
		if want := encoded(t, o); !bytes.Equal(got.Bytes(), want) {
			t.Errorf("outcome.Write(%#v) =\n%s\nwant\n%s", o, got.Bytes(), want)
		}
		if _, ok := o.(outcome.Appender).AppendJSON(nil); ok {
			fast++
		}
	}
	if fast < len(outs)/3 { // the plain kind "k" of the three
		t.Errorf("only %d of %d outputs wrote themselves", fast, len(outs))
	}
}
