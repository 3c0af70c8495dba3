package doctest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// mapRowRE is a row of docs/ARCHITECTURE.md's tables: its first cell is
// one path in backquotes, a directory ending in '/'.
var mapRowRE = regexp.MustCompile("^\\| `([^`]+/)` \\|")

// architectureRows are the directories docs/ARCHITECTURE.md's tables map.
func architectureRows(doc string) []string {
	var rows []string
	for _, l := range prose(doc) {
		if m := mapRowRE.FindStringSubmatch(l); m != nil {
			rows = append(rows, strings.TrimSuffix(m[1], "/"))
		}
	}
	return rows
}

// packageDirs are the directories of root holding Go files, but those
// under a testdata directory (fixtures, not packages of the module) and
// under bench/ (programs mapped by bench/'s row), with the top-level
// directories that hold none (goFree, mapped by the rows below them:
// cmd/, internal/); the directories .gitignore names from the root
// (/logs/, /dist/, /.ci/tools/: what runs leave) are not the tree's.
func packageDirs(root string) (dirs []string, goFree map[string]bool, err error) {
	ignored := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(root, ".gitignore")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, "/") && strings.HasSuffix(l, "/") && len(l) > 2 {
				ignored[strings.Trim(l, "/")] = true
			}
		}
	}
	seen := map[string]bool{}
	top := map[string]bool{} // top-level directories with no Go file of their own
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			base := d.Name()
			if rel != "." && (strings.HasPrefix(base, ".") && rel != ".ci" || ignored[rel] || base == "testdata" || base == "node_modules" || rel == "bench") {
				return filepath.SkipDir
			}
			if rel != "." && !strings.Contains(rel, "/") {
				seen[rel] = true
				top[rel] = true
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			dir := filepath.ToSlash(filepath.Dir(rel))
			seen[dir] = true
			delete(top, dir)
		}
		return nil
	})
	dirs = make([]string, 0, len(seen))
	for d := range seen {
		if d != "." {
			dirs = append(dirs, d)
		}
	}
	sort.Strings(dirs)
	return dirs, top, err
}

// TestArchitectureMapsTheTree keeps docs/ARCHITECTURE.md in step with the
// tree: every package directory and every top-level directory has its own
// row, so any behaviour is one hop from the map, and every row names a
// directory that exists.
func TestArchitectureMapsTheTree(t *testing.T) {
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := architectureRows(string(doc))
	mapped := map[string]bool{}
	for _, r := range rows {
		if mapped[r] {
			t.Errorf("docs/ARCHITECTURE.md maps %s/ twice", r)
		}
		mapped[r] = true
		if fi, err := os.Stat(filepath.Join(root, r)); err != nil || !fi.IsDir() {
			t.Errorf("docs/ARCHITECTURE.md maps %s/, which is not a directory of the tree", r)
		}
	}
	dirs, goFree, err := packageDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	below := func(top string) bool {
		for r := range mapped {
			if strings.HasPrefix(r, top+"/") {
				return true
			}
		}
		return false
	}
	for _, d := range dirs {
		if !mapped[d] && !(goFree[d] && below(d)) {
			t.Errorf("%s/ is in the tree but has no row in docs/ARCHITECTURE.md", d)
		}
	}
}

// TestArchitectureRows: the rows the map test reads are the tables' first
// cells, not paths in the prose.
func TestArchitectureRows(t *testing.T) {
	doc := "Text naming `lease/`.\n\n| path | what |\n|---|---|\n| `lease/` | leases |\n| `pool/pooltest/` | suite |\n| `share/` and more | no |\n```\n| `fenced/` | no |\n```\n"
	got := strings.Join(architectureRows(doc), ",")
	if got != "lease,pool/pooltest" {
		t.Errorf("rows = %q", got)
	}
}
