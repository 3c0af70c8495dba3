package linkbudget

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/durable-lease/durable-lease"

// rule forbids a package and everything under it (the package alone
// when exact).
type rule struct {
	pkg, why string
	exact    bool
}

// budget is what one executable may link: besides the standard library
// and this module, only packages of modules; and never forbidden ones.
type budget struct {
	modules   []string
	forbidden []rule
	// required are packages it must link: ones that register themselves
	// at initialisation, whose absence would only show when used.
	required []rule
}

var (
	noKong = []rule{
		{"github.com/alecthomas/kong", "lease reads its whole grammar with cliparse.ParseAlone and prints its help from help_gen.go; kong's package initialisation would cost every call", false},
		{module + "/internal/cli/cliparse/kongparse", "the same: kong, registered as the full parser", false},
	}
	noEtcd = []rule{
		{"go.etcd.io", "etcd:// stores are served by durable-lease-etcd, so that the directory-store executables start without the etcd client", false},
		{"google.golang.org/grpc", "the same: the etcd client's transport", false},
		{module + "/etcdstore", "the same", false},
		{"net", "the same: the directory store needs no network client", true},
	}
	noGit = []rule{
		{module + "/gitstore", "git+… stores are served by durable-lease-git, so that no other executable carries the git store", false},
	}
	noTop = []rule{
		{"github.com/charmbracelet", "pool top runs in durable-lease-top, so that no other executable links its terminal UI", false},
		{module + "/internal/cli/pooltop", "the same", false},
	}
	noPool = []rule{
		{module + "/pool", "lease meets no pool errors and uses package outcome alone: not the pool, its provisioner and their shell interpreter", false},
		{module + "/provision", "the same", false},
		{module + "/runner", "the same", false},
		{"mvdan.cc/sh", "the same: the shell interpreter", false},
	}
	noFIPS = []rule{
		{"crypto", "token fingerprints are lease/sha256.go's, not crypto/sha256's, which brings the FIPS 140 module (its DRBG, AES-GCM, SHA-3 and SHA-512) and its initialisation", false},
	}
	dirPools = []rule{
		{module + "/dirstore/dirpool", "it opens pools, and a directory store's pools are dirpool's, which registers itself with pool.RegisterProvider: without it pool.Open refuses a directory store", true},
	}
	noLibc = []rule{
		{"os/user", "it links libc through cgo when cgo is on (kong imports it)", true},
	}
)

// budgets are every executable's, by its directory under cmd/.
var budgets = map[string]budget{
	"lease": {
		modules:   []string{"golang.org/x/sys"},
		forbidden: slices.Concat(noKong, noEtcd, noGit, noTop, noPool, noFIPS, noLibc),
	},
	"pool": {
		modules:   []string{"github.com/alecthomas/kong", "golang.org/x/sys", "golang.org/x/term", "mvdan.cc/sh/v3"},
		forbidden: slices.Concat(noEtcd, noGit, noTop),
		required:  dirPools,
	},
	"pool-run": {
		modules:   []string{"github.com/alecthomas/kong", "github.com/creack/pty", "github.com/goccy/go-yaml", "golang.org/x/sys", "golang.org/x/term", "mvdan.cc/sh/v3"},
		forbidden: slices.Concat(noEtcd, noGit, noTop),
		required:  dirPools,
	},
	"durable-lease-etcd": {
		modules:   slices.Concat([]string{"github.com/alecthomas/kong", "github.com/creack/pty", "github.com/goccy/go-yaml", "golang.org/x/sys", "golang.org/x/term", "mvdan.cc/sh/v3"}, etcdModules),
		forbidden: slices.Concat(noGit, noTop),
		required:  dirPools,
	},
	"durable-lease-git": {
		modules:   []string{"github.com/alecthomas/kong", "github.com/creack/pty", "github.com/goccy/go-yaml", "golang.org/x/sys", "golang.org/x/term", "mvdan.cc/sh/v3"},
		forbidden: slices.Concat(noEtcd, noTop),
		required:  dirPools,
	},
	"durable-lease-top": {
		modules: slices.Concat([]string{"github.com/alecthomas/kong", "golang.org/x/sys", "golang.org/x/term", "mvdan.cc/sh/v3"}, etcdModules, []string{
			"github.com/aymanbagabas/go-osc52/v2", "github.com/charmbracelet/bubbletea", "github.com/charmbracelet/colorprofile",
			"github.com/charmbracelet/lipgloss", "github.com/charmbracelet/x/ansi", "github.com/charmbracelet/x/cellbuf",
			"github.com/charmbracelet/x/term", "github.com/lucasb-eyer/go-colorful", "github.com/mattn/go-isatty",
			"github.com/mattn/go-runewidth", "github.com/muesli/ansi", "github.com/muesli/cancelreader", "github.com/muesli/termenv",
			"github.com/rivo/uniseg", "github.com/xo/terminfo",
		}),
		forbidden: noGit,
		required:  dirPools,
	},
}

// etcdModules are the etcd client and what it brings.
var etcdModules = []string{
	"github.com/coreos/go-semver", "github.com/coreos/go-systemd/v22", "github.com/golang/protobuf",
	"github.com/grpc-ecosystem/grpc-gateway/v2", "go.etcd.io/etcd/api/v3", "go.etcd.io/etcd/client/pkg/v3",
	"go.etcd.io/etcd/client/v3", "go.uber.org/multierr", "go.uber.org/zap", "golang.org/x/net", "golang.org/x/text",
	"google.golang.org/genproto/googleapis/api", "google.golang.org/genproto/googleapis/rpc", "google.golang.org/grpc",
	"google.golang.org/protobuf",
}

// pkg is what go list -json says of a package.
type pkg struct {
	ImportPath string
	Standard   bool
	Imports    []string
	Module     *struct{ Path string }
}

// deps is the packages cmd links (go list -deps), by import path.
func deps(t *testing.T, cmd string) (main string, all map[string]*pkg) {
	t.Helper()
	main = module + "/cmd/" + cmd
	var stderr bytes.Buffer
	c := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard,Imports,Module", main)
	c.Env = append(os.Environ(), "CGO_ENABLED=0") // as the README installs them
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", main, err, stderr.String())
	}
	all = map[string]*pkg{}
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		p := new(pkg)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		all[p.ImportPath] = p
	}
	return main, all
}

// chain is how main comes to import target: the import path of each
// package on one shortest way from main to target.
func chain(all map[string]*pkg, main, target string) []string {
	from := map[string]string{main: ""}
	queue := []string{main}
	for len(queue) > 0 {
		at := queue[0]
		queue = queue[1:]
		if at == target {
			var way []string
			for ; at != ""; at = from[at] {
				way = append(way, at)
			}
			slices.Reverse(way)
			return way
		}
		for _, next := range all[at].Imports {
			if _, seen := from[next]; !seen && all[next] != nil {
				from[next] = at
				queue = append(queue, next)
			}
		}
	}
	return nil
}

// TestLinkBudgets: every executable links only the modules its budget
// names, and none of the packages it forbids; a failure names the package
// and the chain of imports that brings it in.
func TestLinkBudgets(t *testing.T) {
	dirs, err := os.ReadDir(filepath.Join("..", "..", "..", "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		cmd := d.Name()
		t.Run(cmd, func(t *testing.T) {
			b, ok := budgets[cmd]
			if !ok {
				t.Fatalf("cmd/%s has no link budget: add one to budgets", cmd)
			}
			main, all := deps(t, cmd)
			paths := slices.Sorted(maps.Keys(all))
			for _, path := range paths {
				p := all[path]
				if p.Standard || p.Module == nil || p.Module.Path == module {
					continue
				}
				if !slices.Contains(b.modules, p.Module.Path) {
					t.Errorf("cmd/%s links %s, of module %s, which its budget does not allow:\n\t%s",
						cmd, path, p.Module.Path, strings.Join(chain(all, main, path), "\n\t→ "))
				}
			}
			for _, r := range b.required {
				if all[r.pkg] == nil {
					t.Errorf("cmd/%s must link %s (%s), yet does not", cmd, r.pkg, r.why)
				}
			}
			for _, r := range b.forbidden {
				for _, path := range paths {
					if path == r.pkg || !r.exact && strings.HasPrefix(path, r.pkg+"/") {
						t.Errorf("cmd/%s must not link %s (%s), yet links %s:\n\t%s",
							cmd, r.pkg, r.why, path, strings.Join(chain(all, main, path), "\n\t→ "))
						break
					}
				}
			}
		})
	}
}
