package lease

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestSHA256MatchesCryptoSHA256(t *testing.T) {
	t.Parallel()
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

func mustPlain(t *testing.T, v any) []byte {
	t.Helper()
	b, err := marshalPlain(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTTLRangeIsFmtOfTheBounds(t *testing.T) {
	t.Parallel()
	if want := fmt.Sprintf("between %g and %d minutes", MinTTLMinutes, MaxTTLMinutes); TTLRange != want {
		t.Errorf("TTLRange = %q, want %q", TTLRange, want)
	}
}

func TestRecordFileEncodingUnchanged(t *testing.T) {
	t.Parallel()
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
		got, err := r.EncodeFile()
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
			t.Errorf("EncodeFile =\n%s\nwant\n%s", got, want.Bytes())
		}
	}
}

func TestSecureRandomHandsOutFreshBytes(t *testing.T) {
	t.Parallel()
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

// TestNoFmtAtInit: no package-level variable of package lease (nor of
// dirstore and jsonfast, which every lease command links) is
// initialised with a call into fmt, nor does an init function call it:
// every process that links lease would format them at start.
func TestNoFmtAtInit(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	for _, dir := range []string{".", "../dirstore", "../internal/sys/jsonfast"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if name := e.Name(); !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			{
				for _, d := range f.Decls {
					var roots []ast.Node
					switch d := d.(type) {
					case *ast.GenDecl:
						if d.Tok == token.VAR {
							roots = append(roots, d)
						}
					case *ast.FuncDecl:
						if d.Name.Name == "init" && d.Recv == nil {
							roots = append(roots, d)
						}
					}
					for _, r := range roots {
						ast.Inspect(r, func(n ast.Node) bool {
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
		}
	}
}
