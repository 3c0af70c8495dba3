package npmpkg

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

func TestMain(m *testing.M) {
	code := testrun.Run(m, testrun.Parallel(4))
	if tarballs.dir != "" {
		os.RemoveAll(tarballs.dir)
	}
	os.Exit(code)
}

// root is the checkout, two directories up from this package's.
const root = "../../.."

// TestPlatformsAreTheReleases: the platforms the main package names are
// those .goreleaser.yaml builds, for every command it builds, and those
// commands are the six of cmd/.
func TestPlatformsAreTheReleases(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Builds []struct {
			ID      string   `yaml:"id"`
			Main    string   `yaml:"main"`
			Binary  string   `yaml:"binary"`
			Targets []string `yaml:"targets"`
		} `yaml:"builds"`
	}
	// A build's own keys after "<<: *command" replace the merged ones.
	if err := yaml.UnmarshalWithOptions(data, &cfg, yaml.AllowDuplicateMapKey()); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range platforms {
		want = append(want, p.goos+"_"+p.goarch)
	}
	var ids []string
	for _, b := range cfg.Builds {
		ids = append(ids, b.ID)
		if !slices.Equal(b.Targets, want) {
			t.Errorf("build %s: targets %v, want the platforms of platforms.go, %v", b.ID, b.Targets, want)
		}
		if b.Main != "./cmd/"+b.ID || b.Binary != "bin/"+b.ID {
			t.Errorf("build %s: main %s, binary %s; want ./cmd/%[1]s and bin/%[1]s", b.ID, b.Main, b.Binary)
		}
	}
	if !slices.Equal(ids, commands) {
		t.Errorf(".goreleaser.yaml builds %v, want %v", ids, commands)
	}
	dirs, err := filepath.Glob(filepath.Join(root, "cmd", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, d := range dirs {
		cmds = append(cmds, filepath.Base(d))
	}
	slices.Sort(cmds)
	sorted := slices.Sorted(slices.Values(commands))
	if !slices.Equal(cmds, sorted) {
		t.Errorf("cmd/ holds %v, the packages carry %v", cmds, sorted)
	}
}

// fakeDist writes a goreleaser dist directory (metadata.json and
// artifacts.json) whose binaries for the host's platform are those of bin.
func fakeDist(t *testing.T, bin, version string) string {
	t.Helper()
	dist := t.TempDir()
	meta, _ := json.Marshal(map[string]string{"project_name": "durable-lease", "version": version})
	var arts []map[string]string
	for _, c := range commands {
		arts = append(arts, map[string]string{"name": "bin/" + c, "path": filepath.Join(bin, c), "goos": runtime.GOOS, "goarch": runtime.GOARCH, "type": "Binary"})
	}
	arts = append(arts, map[string]string{"name": "durable-lease.tar.gz", "path": "dist/durable-lease.tar.gz", "type": "Archive"})
	data, _ := json.Marshal(arts)
	if err := os.WriteFile(filepath.Join(dist, "metadata.json"), meta, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dist, "artifacts.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dist
}

// hostPlatform is the release platform of this machine, or the test skips.
func hostPlatform(t *testing.T) platform {
	t.Helper()
	for _, p := range platforms {
		if p.goos == runtime.GOOS && p.goarch == runtime.GOARCH {
			return p
		}
	}
	testrun.Skip(t, "%s/%s is not a release platform", runtime.GOOS, runtime.GOARCH)
	return platform{}
}

// TestGenerate: the main package has a bin entry and a shim per command,
// the man pages and completions, and names every platform's package at
// its own version; the platform package has the six binaries, runnable.
func TestGenerate(t *testing.T) {
	p := hostPlatform(t)
	bin := t.TempDir()
	for _, c := range commands {
		if err := os.WriteFile(filepath.Join(bin, c), []byte("#!/bin/sh\necho "+c+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "npm")
	written, err := Generate(Options{Dist: fakeDist(t, bin, "1.2.3-SNAPSHOT-abc1234"), Out: out, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(out, "cli"), filepath.Join(out, p.dirName())}; !slices.Equal(written, want) {
		t.Fatalf("wrote %v, want %v", written, want)
	}
	var m manifest
	readJSON(t, filepath.Join(out, "cli", "package.json"), &m)
	if m.Name != "@durable-lease/cli" || m.Version != "1.2.3-SNAPSHOT-abc1234" || len(m.Bin) != len(commands) || len(m.OptionalDependencies) != len(platforms) {
		t.Errorf("main package.json: %+v", m)
	}
	for dep, v := range m.OptionalDependencies {
		if v != m.Version || !strings.HasPrefix(dep, "@durable-lease/cli-") {
			t.Errorf("optional dependency %s@%s, want the release's own version", dep, v)
		}
	}
	for _, c := range commands {
		fi, err := os.Stat(filepath.Join(out, "cli", m.Bin[c]))
		if err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("bin %s: %v %v", c, fi, err)
		}
		fi, err = os.Stat(filepath.Join(out, p.dirName(), "bin", c))
		if err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s binary: %v %v", c, fi, err)
		}
	}
	for _, page := range m.Man {
		if _, err := os.Stat(filepath.Join(out, "cli", page)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "cli", "share", "bash-completion", "completions", "pool-run")); err != nil {
		t.Error(err)
	}
	var pm manifest
	readJSON(t, filepath.Join(out, p.dirName(), "package.json"), &pm)
	if pm.Name != p.packageName() || pm.Version != m.Version || !slices.Equal(pm.OS, []string{p.os}) || !slices.Equal(pm.CPU, []string{p.cpu}) || pm.Bin != nil {
		t.Errorf("platform package.json: %+v", pm)
	}

	// A platform that is not a release platform, or one short of a
	// command, is refused.
	broken := fakeDist(t, bin, "1.0.0")
	data, _ := os.ReadFile(filepath.Join(broken, "artifacts.json"))
	os.WriteFile(filepath.Join(broken, "artifacts.json"), []byte(strings.Replace(string(data), `"name":"bin/lease",`, `"name":"bin/other",`, 1)), 0o644)
	if _, err := Generate(Options{Dist: broken, Out: out, Root: root}); err == nil {
		t.Error("a dist with a binary of no command was taken")
	}
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestShimFindsThePlatformPackage runs a shim, with sh, where each package
// manager puts the packages, and checks it runs the platform's binary
// with its arguments as they were, from the caller's directory.
func TestShimFindsThePlatformPackage(t *testing.T) {
	p := hostPlatform(t)
	sh, err := exec.LookPath("sh")
	if err != nil {
		testrun.Missing(t, "sh is not installed")
	}
	// The "binary" prints who it is, where it runs and its arguments.
	binary := "#!/bin/sh\necho \"binary $0 in $PWD\"; for a in \"$@\"; do echo \"[$a]\"; done\n"
	put := func(t *testing.T, file, text string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	link := func(t *testing.T, target, name string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	plat := "@durable-lease/" + p.dirName()
	for _, tc := range []struct {
		name string
		// lay lays out a project under dir and returns the path to run
		// (relative to dir) and the binary it must run.
		lay func(t *testing.T, dir string) (run, binary string)
		env []string
	}{
		{name: "npm, the platform package hoisted", lay: func(t *testing.T, dir string) (string, string) {
			put(t, filepath.Join(dir, "node_modules/@durable-lease/cli/bin/pool-run"), shimFor("pool-run"), 0o755)
			put(t, filepath.Join(dir, "node_modules", plat, "bin/pool-run"), binary, 0o755)
			link(t, "../@durable-lease/cli/bin/pool-run", filepath.Join(dir, "node_modules/.bin/pool-run"))
			return "node_modules/.bin/pool-run", filepath.Join(dir, "node_modules", plat, "bin/pool-run")
		}},
		{name: "npm, nested in the main package", lay: func(t *testing.T, dir string) (string, string) {
			put(t, filepath.Join(dir, "node_modules/@durable-lease/cli/bin/pool-run"), shimFor("pool-run"), 0o755)
			put(t, filepath.Join(dir, "node_modules/@durable-lease/cli/node_modules", plat, "bin/pool-run"), binary, 0o755)
			// A stale package of the same name higher up loses to it.
			put(t, filepath.Join(dir, "node_modules", plat, "bin/pool-run"), "#!/bin/sh\necho wrong\n", 0o755)
			link(t, "../@durable-lease/cli/bin/pool-run", filepath.Join(dir, "node_modules/.bin/pool-run"))
			return "node_modules/.bin/pool-run", filepath.Join(dir, "node_modules/@durable-lease/cli/node_modules", plat, "bin/pool-run")
		}},
		{name: "pnpm, the store linked into node_modules", lay: func(t *testing.T, dir string) (string, string) {
			store := filepath.Join(dir, "node_modules/.pnpm/@durable-lease+cli@1.0.0/node_modules")
			put(t, filepath.Join(store, "@durable-lease/cli/bin/pool-run"), shimFor("pool-run"), 0o755)
			put(t, filepath.Join(dir, "node_modules/.pnpm", "x@1.0.0/node_modules", plat, "bin/pool-run"), binary, 0o755)
			link(t, "../../../x@1.0.0/node_modules/"+plat, filepath.Join(store, plat))
			link(t, "../.pnpm/@durable-lease+cli@1.0.0/node_modules/@durable-lease/cli", filepath.Join(dir, "node_modules/@durable-lease/cli"))
			// pnpm's bin entry is a script that runs the file through
			// the linked directory.
			put(t, filepath.Join(dir, "node_modules/.bin/pool-run"), "#!/bin/sh\nbasedir=$(dirname \"$0\")\nexec \"$basedir/../@durable-lease/cli/bin/pool-run\" \"$@\"\n", 0o755)
			return "node_modules/.bin/pool-run", filepath.Join(store, plat, "bin/pool-run")
		}},
		{name: "a directory with spaces, CDPATH set", env: []string{"CDPATH=/"}, lay: func(t *testing.T, dir string) (string, string) {
			proj := filepath.Join(dir, "my project")
			put(t, filepath.Join(proj, "node_modules/@durable-lease/cli/bin/pool-run"), shimFor("pool-run"), 0o755)
			put(t, filepath.Join(proj, "node_modules", plat, "bin/pool-run"), binary, 0o755)
			link(t, "../@durable-lease/cli/bin/pool-run", filepath.Join(proj, "node_modules/.bin/pool-run"))
			return "my project/node_modules/.bin/pool-run", filepath.Join(proj, "node_modules", plat, "bin/pool-run")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			run, wantBinary := tc.lay(t, dir)
			// As the package manager runs it (its #!/bin/sh), and by each
			// shell that may be a system's sh.
			for _, interp := range []string{"", "dash", "bash", "busybox"} {
				args := []string{run, "--kind", "a b", "", "*", "$HOME"}
				if interp != "" {
					path, err := exec.LookPath(interp)
					if err != nil {
						continue
					}
					if interp == "busybox" {
						args = append([]string{"sh"}, args...)
					}
					args = append([]string{path}, args...)
				}
				cmd := exec.Command(args[0], args[1:]...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), tc.env...)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s (%s): %v\n%s", run, interp, err, out)
				}
				// The binary run by a relative path is run from dir.
				got, _ := strings.CutPrefix(string(out), "binary ")
				if !strings.HasPrefix(got, "/") {
					got = dir + "/" + got
				}
				want := wantBinary + " in " + dir + "\n[--kind]\n[a b]\n[]\n[*]\n[$HOME]\n"
				if got != want {
					t.Errorf("%s: got\n%s\nwant\n%s", interp, out, want)
				}
			}
		})
	}
	t.Run("no platform package", func(t *testing.T) {
		dir := t.TempDir()
		put(t, filepath.Join(dir, "node_modules/@durable-lease/cli/bin/lease"), shimFor("lease"), 0o755)
		cmd := exec.Command(sh, filepath.Join(dir, "node_modules/@durable-lease/cli/bin/lease"), "--version")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 127 || !strings.Contains(string(out), "@durable-lease/"+p.dirName()+", an optional dependency of @durable-lease/cli that is not installed") {
			t.Errorf("%v\n%s", err, out)
		}
	})
}
