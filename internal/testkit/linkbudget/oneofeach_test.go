package linkbudget

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// oneOfEach is a helper the module keeps exactly one of: the pattern that
// betrays another copy of it, the one directory that may hold it, and
// whether test files count too.
type oneOfEach struct {
	what  string
	re    *regexp.Regexp
	home  string
	tests bool
}

var onlyOnes = []oneOfEach{
	{
		what:  "a reader of /proc/PID/stat, a task's children list or a process's open files (use internal/sys/procfs)",
		re:    regexp.MustCompile(`/stat"|, "stat"\)|/children"|task/\*|"fd"\)|ReadDir\(.*/fd"`),
		home:  "internal/sys/procfs/",
		tests: true,
	},
	{
		what: "a JSON string writer (use internal/sys/jsonfast.AppendString)",
		re:   regexp.MustCompile(`"0123456789abcdef"|\\u00%0?[24]x`),
		home: "internal/sys/jsonfast/",
	},
	{
		what:  "a decoder of inotify events (use internal/sys/inotify.Each)",
		re:    regexp.MustCompile(`SizeofInotifyEvent`),
		home:  "internal/sys/inotify/",
		tests: true,
	},
	{
		what:  "a signal to a whole process group, kill(-pgid) (use internal/sys/procgroup)",
		re:    regexp.MustCompile(`Kill\(-`),
		home:  "internal/sys/procgroup/",
		tests: true,
	},
}

// moduleRoot is the directory of go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// TestOneOfEach keeps each helper of onlyOnes in its one home: a line of
// Go outside it that matches the helper's pattern is a twin.
func TestOneOfEach(t *testing.T) {
	root := moduleRoot(t)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || n == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || path == filepath.Join(root, "internal", "testkit", "linkbudget", "oneofeach_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for n, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			for _, o := range onlyOnes {
				if strings.HasPrefix(rel, o.home) || !o.tests && strings.HasSuffix(rel, "_test.go") {
					continue
				}
				if o.re.MatchString(line) {
					t.Errorf("%s:%d: %s, outside %s:\n\t%s", rel, n+1, o.what, o.home, strings.TrimSpace(line))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOneOfEachPatterns: each pattern catches the twins it was written
// for, and passes the lines that merely resemble them.
func TestOneOfEachPatterns(t *testing.T) {
	cases := []struct {
		rule int
		line string
		want bool
	}{
		{0, `b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))`, true},
		{0, `b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")`, true},
		{0, `tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))`, true},
		{0, `st, err := procfs.ReadStat(pid)`, false},
		{0, `if fi, err := os.Stat(path); err != nil {`, false},
		{1, `const hex = "0123456789abcdef"`, true},
		{1, `fmt.Fprintf(w, "\\u00%02x", c)`, true},
		{1, `dst = jsonfast.AppendString(dst, s, true)`, false},
	}
	for _, c := range cases {
		if got := onlyOnes[c.rule].re.MatchString(c.line); got != c.want {
			t.Errorf("rule %d on %q = %v, want %v", c.rule, c.line, got, c.want)
		}
	}
}
