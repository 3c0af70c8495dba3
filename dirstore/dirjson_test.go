package dirstore

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/durable-lease/durable-lease/internal/testkit/storetest"
)

func TestHolderMarshalMatchesEncodingJSON(t *testing.T) {
	hs := []guardHolder{{}, {ID: "x", PID: 1}, selfHolder(), {ID: "<&>", PID: -3, Host: "h\u2028", Boot: "b\xff", PIDNS: "pid:[1]", Start: math.MaxUint64, Lock: true}}
	for _, s := range storetest.JSONStrings()[:60] {
		hs = append(hs, guardHolder{ID: s, Host: s, PIDNS: s, Lock: len(s)%2 == 0, Start: uint64(len(s))})
	}
	for _, h := range hs {
		want, _ := json.Marshal(h)
		if got := h.marshal(); !bytes.Equal(got, want) {
			t.Errorf("marshal(%+v) = %s, want %s", h, got, want)
		}
	}
}

func TestFenceMarkCodecMatchesEncodingJSON(t *testing.T) {
	for _, m := range []fenceMark{{1, "abc"}, {math.MaxInt64, fenceToken("t")}, {42, ""}, {7, "<&>\"x"}} {
		want, _ := json.Marshal(m)
		if got := m.marshal(); !bytes.Equal(got, want) {
			t.Errorf("marshal(%+v) = %s, want %s", m, got, want)
		}
	}
	inputs := []string{`{"f":1,"t":"abc"}`, `{"f":12,"t":"0123456789ab"}`, `{"f":0,"t":"a"}`, `{"f":01,"t":"a"}`, `{"f":-1,"t":"a"}`,
		`{"f":9223372036854775807,"t":""}`, `{"f":9223372036854775808,"t":""}`, `{"f":1,"t":"ABC"}`, `{"f":1,"t":"a"} `,
		`{"t":"a","f":1}`, `{"f":1.0,"t":"a"}`, `{"f":1,"t":"a\n"}`, `{"f":1,"t":"a","x":2}`, `{"f":1}`, `{}`, `[]`, ``, `{"f":1,"t":"a"`}
	for _, in := range inputs {
		m, ok := decodeFence([]byte(in))
		var want fenceMark
		err := json.Unmarshal([]byte(in), &want)
		wantOK := err == nil && want.Fence > 0
		if !wantOK {
			want = fenceMark{}
		}
		if ok != wantOK || m != want {
			t.Errorf("decodeFence(%s) = %+v, %v; want %+v, %v", in, m, ok, want, wantOK)
		}
	}
}

func FuzzDecodeFenceMatchesEncodingJSON(f *testing.F) {
	f.Add([]byte(`{"f":3,"t":"0123456789ab"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		m, ok := decodeFence(in)
		var want fenceMark
		err := json.Unmarshal(in, &want)
		wantOK := err == nil && want.Fence > 0
		if !wantOK {
			want = fenceMark{}
		}
		if ok != wantOK || m != want {
			t.Errorf("decodeFence(%q) = %+v, %v; want %+v, %v", in, m, ok, want, wantOK)
		}
	})
}
