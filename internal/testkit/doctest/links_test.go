package doctest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*)$`)
	slugDrop  = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// slug is the anchor GitHub gives a heading: lower case, punctuation and
// backquotes dropped, spaces as hyphens.
func slug(heading string) string {
	return strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(strings.TrimSpace(heading)), ""), " ", "-")
}

// prose is doc without its fenced blocks, as lines.
func prose(doc string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(doc, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			in = !in
			continue
		}
		if !in {
			out = append(out, l)
		}
	}
	return out
}

// anchors are the heading anchors of a Markdown document.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	for _, l := range prose(doc) {
		if m := headingRE.FindStringSubmatch(l); m != nil {
			out[slug(m[1])] = true
		}
	}
	return out
}

// brokenLinks lists the relative links of the document at path (in root)
// whose file or heading does not exist.
func brokenLinks(root, path string) ([]string, error) {
	doc, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return nil, err
	}
	var broken []string
	for n, l := range prose(string(doc)) {
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			resolved := filepath.Join(root, path)
			if file != "" {
				resolved = filepath.Join(root, filepath.Dir(path), file)
			}
			info, err := os.Stat(resolved)
			if err != nil {
				broken = append(broken, fmt.Sprintf("%s (prose line %d): %s: no such file", path, n+1, target))
				continue
			}
			if anchor == "" || info.IsDir() || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			text, err := os.ReadFile(resolved)
			if err != nil {
				return nil, err
			}
			if !anchors(string(text))[anchor] {
				broken = append(broken, fmt.Sprintf("%s (prose line %d): %s: no heading with that anchor", path, n+1, target))
			}
		}
	}
	return broken, nil
}

// TestLinks: every relative link of the README, docs/ and the examples'
// READMEs names a file that exists and, into a Markdown file, a heading
// it has.
func TestLinks(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	more, _ := filepath.Glob(filepath.Join(root, "*", "*", "README.md"))
	paths := []string{"README.md"}
	for _, d := range append(docs, more...) {
		rel, _ := filepath.Rel(root, d)
		paths = append(paths, rel)
	}
	for _, p := range paths {
		broken, err := brokenLinks(root, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range broken {
			t.Error(b)
		}
	}
}

func TestSlug(t *testing.T) {
	t.Parallel()
	for h, want := range map[string]string{
		"Watching a pool: `pool top`":                         "watching-a-pool-pool-top",
		"4.3 Differences from the Node tool":                  "43-differences-from-the-node-tool",
		"With the guardian (issue 16)":                        "with-the-guardian-issue-16",
		"pool top: what the live view costs other pool calls": "pool-top-what-the-live-view-costs-other-pool-calls",
		"Fencing: let the resource refuse a late holder":      "fencing-let-the-resource-refuse-a-late-holder",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}
