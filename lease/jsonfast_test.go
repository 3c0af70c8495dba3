package lease

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestSHA256MatchesCryptoSHA256(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 300; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		if got, want := sha256Sum(b), sha256.Sum256(b); got != want {
			t.Fatalf("sha256Sum of %d bytes = %x, want %x", n, got, want)
		}
	}
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
		if got := appendJSONString(nil, s, true); !bytes.Equal(got, want) {
			t.Errorf("appendJSONString(%q, html) = %s, want %s", s, got, want)
		}
		if got, want := appendJSONString(nil, s, false), mustPlain(t, s); !bytes.Equal(got, want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got, want)
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

func TestHolderMarshalMatchesEncodingJSON(t *testing.T) {
	hs := []guardHolder{{}, {ID: "x", PID: 1}, self(), {ID: "<&>", PID: -3, Host: "h\u2028", Boot: "b\xff", PIDNS: "pid:[1]", Start: math.MaxUint64, Lock: true}}
	for _, s := range jsonStrings()[:60] {
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

// TestNoFmtAtInit: no package-level variable of package lease is
// initialised with a call into fmt, nor does an init function call it:
// every process that links lease would format them at start.
func TestNoFmtAtInit(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok != token.VAR {
				continue
			}
			if fd, ok := d.(*ast.FuncDecl); ok && (fd.Name.Name != "init" || fd.Recv != nil) {
				continue
			}
			ast.Inspect(d, func(n ast.Node) bool {
				if _, lit := n.(*ast.FuncLit); lit {
					return false // runs later, if ever
				}
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "fmt" {
						t.Errorf("%s: fmt.%s runs when the package is initialised", fset.Position(sel.Pos()), sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}

func TestTTLRangeIsFmtOfTheBounds(t *testing.T) {
	if want := fmt.Sprintf("between %g and %d minutes", MinTTLMinutes, MaxTTLMinutes); TTLRange != want {
		t.Errorf("TTLRange = %q, want %q", TTLRange, want)
	}
}

func TestRecordFileEncodingUnchanged(t *testing.T) {
	// The file form of records of every shape, against the encoding
	// this package used before it wrote scalars and indentation itself:
	// encoding/json's, field by field.
	hb := time.Date(2026, 12, 1, 10, 48, 7, 232e6, time.UTC)
	recs := []*Record{
		{V: 1, Kind: "k", Owner: "agent-7", Token: "5f0c", Heartbeat: hb, TTLMinutes: 15, AcquiredAt: hb},
		{V: 1, Kind: "k", Owner: "<o&>", Token: "t\u2028", Heartbeat: hb, TTLMinutes: 1e-7, AcquiredAt: hb, Payload: json.RawMessage(`{"pr": 123, "x":[1, 2]}`), Boot: &BootStamp{ID: "id/1", Ms: 99}},
		{V: 1, Kind: "k", Owner: "o", Token: "t", Heartbeat: hb, TTLMinutes: 527040, AcquiredAt: hb, Extra: map[string]json.RawMessage{"zz": json.RawMessage(`{"a": [ ]}`), "boot": json.RawMessage(`"other"`)}},
	}
	for _, r := range recs {
		got, err := r.encodeFile()
		if err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		compact.WriteByte('{')
		add := func(name string, v any) {
			if compact.Len() > 1 {
				compact.WriteByte(',')
			}
			compact.Write(mustPlain(t, name))
			compact.WriteByte(':')
			compact.Write(mustPlain(t, v))
		}
		payload := r.Payload
		if payload == nil {
			payload = json.RawMessage("null")
		}
		add("v", r.V)
		add("kind", r.Kind)
		add("owner", r.Owner)
		add("token", r.Token)
		add("heartbeat", FormatTime(r.Heartbeat))
		add("ttlMinutes", r.TTLMinutes)
		add("payload", payload)
		add("acquiredAt", FormatTime(r.AcquiredAt))
		if r.Boot != nil {
			add("boot", bootField{ID: r.Boot.ID, Ms: r.Boot.Ms, At: FormatTime(r.Heartbeat)})
		}
		names := make([]string, 0, len(r.Extra))
		for k := range r.Extra {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			add(k, r.Extra[k])
		}
		compact.WriteByte('}')
		var want bytes.Buffer
		if err := json.Indent(&want, compact.Bytes(), "", "  "); err != nil {
			t.Fatal(err)
		}
		want.WriteByte('\n')
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("encodeFile =\n%s\nwant\n%s", got, want.Bytes())
		}
	}
}

func TestSecureRandomHandsOutFreshBytes(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 2000; i++ {
		for _, n := range []int{8, 16, 33} {
			b := make([]byte, n)
			if err := secureRandom(b); err != nil {
				t.Fatal(err)
			}
			if seen[string(b)] {
				t.Fatalf("secureRandom gave %x twice", b)
			}
			seen[string(b)] = true
		}
	}
}
