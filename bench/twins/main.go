//go:build ignore

// Command twins rewrites a copy of this repository's tree so that one fast
// twin (or all of them) is replaced by the straightforward code it stands
// for, for bench/twins.sh, which builds lease from each copy and times
// them side by side. Each edit names a function (or a statement) found
// exactly once among the tree's non-test Go files, wherever it lives, and
// the code that replaces it (in the files this platform builds); a twin
// whose function is gone or renamed
// makes it fail, so the table of variants is kept up to date.
//
//	go run ./bench/twins DIR VARIANT
//
// VARIANT is one of the names of variants, or "none" for every edit at
// once. The copy is changed in place.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// edit replaces the body of function fn ("Type.method" for a method), or
// the text old, in the one non-test Go file that has it; imports are
// added to that file, and decl appended to it.
type edit struct {
	fn, body string
	old, new string
	imports  []string
	decl     string
}

// variants are the fast twins, each with the edits that turn it back into
// the straightforward code its guard test compares it with.
var variants = map[string][]edit{
	// cliparse.ParseAlone (the quick parser) → kong, as pool parses.
	"kong": {{
		old:     `cliparse.ParseAlone(&c, "lease", embeddedHelp, args, stdout)`,
		new:     `kongParse(&c, args, stdout, stderr)`,
		imports: []string{"github.com/durable-lease/durable-lease/internal/cli/cliparse/kongparse"},
		decl: `func kongParse(c *cli, args []string, stdout, stderr io.Writer) (cliparse.Command, bool, error) {
	cmd, exited, _, err := kongparse.Parse(c, "lease", description, helpVars(), args, stdout, stderr)
	return cmd, exited, err
}`,
	}},
	// signals.Lazy → signal.NotifyContext at start.
	"signals": {{
		fn:      "main",
		old:     "signals.New(",
		body:    `{ ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP); os.Exit(leasecli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)) }`,
		imports: []string{"context", "os/signal"},
	}},
	// outcome.Appender (AppendJSON) → encoding/json's encoder.
	"appendjson": {{
		fn:   "Write",
		old:  "a.AppendJSON(",
		body: `{ enc := json.NewEncoder(w); enc.SetEscapeHTML(false); if pretty { enc.SetIndent("", "  ") }; return enc.Encode(v) }`,
	}},
	// jsonfast.go and the marshal methods → encoding/json.
	"jsonfast": {
		{fn: "AppendString", old: "package jsonfast", body: `{ var b bytes.Buffer; enc := json.NewEncoder(&b); enc.SetEscapeHTML(escapeHTML); _ = enc.Encode(s); return append(dst, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...) }`, imports: []string{"bytes", "encoding/json"}},
		{fn: "guardHolder.marshal", body: `{ b, _ := json.Marshal(h); return b }`, imports: []string{"encoding/json"}},
		{fn: "fenceMark.marshal", body: `{ b, _ := json.Marshal(m); return b }`, imports: []string{"encoding/json"}},
	},
	// decodeFenceFast → encoding/json.
	"fencefast": {
		{fn: "decodeFenceFast", body: `{ return m, false }`},
	},
	// sha256.go → crypto/sha256.
	"sha256": {
		{fn: "sha256Sum", body: `{ return sha256.Sum256(data) }`, imports: []string{"crypto/sha256"}},
	},
	// the hand-written pattern checks → regexp, compiled at package
	// initialisation.
	"patterns": {
		{fn: "ValidKind", body: `{ return kindRE.MatchString(kind) }`, imports: []string{"regexp"}, decl: "var kindRE = regexp.MustCompile(KindPattern)"},
		{fn: "validDefaultOwner", body: `{ return defaultOwnerRE.MatchString(owner) }`, imports: []string{"regexp"}, decl: "var defaultOwnerRE = regexp.MustCompile(DefaultOwnerPattern)"},
	},
	// secureRandom (one pooled getrandom(2)) → crypto/rand.
	"cryptorand": {
		{fn: "secureRandom", body: `{ _, err := rand.Read(b); return err }`, imports: []string{"crypto/rand"}},
	},
	// the raw getrandom(2) → x/sys/unix's, through the vDSO.
	"getrandom": {
		{fn: "getrandom", body: `{ _, err := unix.Getrandom(b, 0); return err }`},
	},
}

func main() {
	if len(os.Args) != 3 {
		fail("usage: twins DIR VARIANT")
	}
	dir, name := os.Args[1], os.Args[2]
	edits, ok := variants[name]
	if name == "none" {
		var names []string
		for n := range variants {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			edits = append(edits, variants[n]...)
		}
	} else if !ok {
		fail("no variant %q", name)
	}
	for _, e := range edits {
		if err := apply(dir, e); err != nil {
			fail("%s: %v", name, err)
		}
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "twins: "+format+"\n", args...)
	os.Exit(2)
}

// apply makes e in the one file of dir's tree that it fits.
func apply(dir string, e edit) error {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bench" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != dir {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			// Only the files of this platform's build, as go build picks them.
			if ok, err := build.Default.MatchFile(filepath.Dir(p), d.Name()); err != nil || !ok {
				return err
			}
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var hits []string
	var at [2]int
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if e.fn == "" {
			if n := bytes.Count(src, []byte(e.old)); n > 0 {
				hits = append(hits, f)
				at = [2]int{bytes.Index(src, []byte(e.old)), len(e.old)}
			}
			continue
		}
		if e.old != "" && !bytes.Contains(src, []byte(e.old)) {
			continue // the function of that name that has it
		}
		if lo, hi, ok := findFunc(f, src, e.fn); ok {
			hits = append(hits, f)
			at = [2]int{lo, hi - lo}
		}
	}
	what := e.fn
	if what == "" {
		what = strconv.Quote(e.old)
	}
	if len(hits) != 1 {
		return fmt.Errorf("%s is in %d files (%v), want 1", what, len(hits), hits)
	}
	f := hits[0]
	src, _ := os.ReadFile(f)
	repl := e.new
	if e.fn != "" {
		repl = e.body
	}
	src = append(append(append([]byte{}, src[:at[0]]...), repl...), src[at[0]+at[1]:]...)
	if e.decl != "" {
		src = append(append(src, '\n'), e.decl+"\n"...)
	}
	src, err = fixImports(f, src, e.imports)
	if err != nil {
		return fmt.Errorf("%s in %s: %v", what, f, err)
	}
	return os.WriteFile(f, src, 0o644)
}

// findFunc returns the byte range of the body of function name in src.
func findFunc(file string, src []byte, name string) (lo, hi int, ok bool) {
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, file, src, 0)
	if err != nil {
		return 0, 0, false
	}
	recv, fn, isMethod := strings.Cut(name, ".")
	if !isMethod {
		fn, recv = recv, ""
	}
	for _, d := range af.Decls {
		fd, isFunc := d.(*ast.FuncDecl)
		if !isFunc || fd.Name.Name != fn || fd.Body == nil {
			continue
		}
		if (fd.Recv == nil) != (recv == "") {
			continue
		}
		if recv != "" {
			t := fd.Recv.List[0].Type
			if s, ok := t.(*ast.StarExpr); ok {
				t = s.X
			}
			if id, ok := t.(*ast.Ident); !ok || id.Name != recv {
				continue
			}
		}
		return fset.Position(fd.Body.Lbrace).Offset, fset.Position(fd.Body.Rbrace).Offset + 1, true
	}
	return 0, 0, false
}

// fixImports adds the imports src lacks among want, and turns the ones it
// no longer uses into blank imports.
func fixImports(file string, src []byte, want []string) ([]byte, error) {
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, file, src, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, s := range af.Imports {
		p, _ := strconv.Unquote(s.Path.Value)
		have[p] = true
	}
	var add strings.Builder
	for _, p := range want {
		if !have[p] {
			fmt.Fprintf(&add, "import %q\n", p)
			have[p] = true
		}
	}
	if add.Len() > 0 {
		end := fset.Position(af.Name.End()).Offset
		src = append(append(append([]byte{}, src[:end]...), "\n"+add.String()...), src[end:]...)
	}
	fset = token.NewFileSet()
	af, err = parser.ParseFile(fset, file, src, 0)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	ast.Inspect(af, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		}
		return true
	})
	var offsets []int
	for _, s := range af.Imports {
		if s.Name != nil {
			continue
		}
		p, _ := strconv.Unquote(s.Path.Value)
		local := path.Base(p)
		if strings.HasPrefix(local, "v") && strings.Contains(p, "/") {
			if _, err := strconv.Atoi(local[1:]); err == nil {
				local = path.Base(path.Dir(p))
			}
		}
		if !used[local] {
			offsets = append(offsets, fset.Position(s.Path.Pos()).Offset)
		}
	}
	for i := len(offsets) - 1; i >= 0; i-- {
		o := offsets[i]
		src = append(append(append([]byte{}, src[:o]...), "_ "...), src[o:]...)
	}
	return src, nil
}
