// Package npmpkg writes the npm packages of a release from goreleaser's
// build of it: the main package @durable-lease/cli, whose bin entries are
// the six commands, and one package per platform, @durable-lease/cli-OS-CPU,
// carrying that platform's six binaries, which the main package names as
// optional dependencies of the same version (npm installs the one whose
// os and cpu match). This is the layout of esbuild's and lefthook's
// packages, without an install script: a bin entry is a small sh script
// that execs the binary (see shim.go).
//
//	go run ./internal/release/npmpkg/gen.go -dist dist -out dist/npm
//
// reads dist/metadata.json (the version) and dist/artifacts.json (the
// binaries, by platform), and writes OUT/cli and OUT/cli-OS-CPU for every
// platform built; `npm pack` in each makes the tarballs
// (release/build.sh does both). gen.go is kept out of go install ./...
// (and so out of what pre-commit's golang hooks install) by its build tag.
package npmpkg

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Options say where Generate reads and writes.
type Options struct {
	Dist string // goreleaser's dist directory
	Out  string // where the package directories go
	Root string // the checkout
}

// artifact is what Generate reads of an entry of goreleaser's
// artifacts.json.
type artifact struct {
	Name   string `json:"name"` // bin/lease
	Path   string `json:"path"` // dist/lease_linux_amd64_v1/bin/lease
	Goos   string `json:"goos"`
	Goarch string `json:"goarch"`
	Type   string `json:"type"` // Binary, Archive, Checksum, ...
}

// manifest is a package.json, its fields in the order npm writes them.
type manifest struct {
	Name                 string            `json:"name"`
	Version              string            `json:"version"`
	Description          string            `json:"description"`
	Bin                  map[string]string `json:"bin,omitempty"`
	Man                  []string          `json:"man,omitempty"`
	Files                []string          `json:"files"`
	OS                   []string          `json:"os"`
	CPU                  []string          `json:"cpu,omitempty"`
	OptionalDependencies map[string]string `json:"optionalDependencies,omitempty"`
	PreferUnplugged      bool              `json:"preferUnplugged,omitempty"`
}

// Generate writes the packages and returns their directories, the main
// package's first.
func Generate(o Options) ([]string, error) {
	version, err := readVersion(filepath.Join(o.Dist, "metadata.json"))
	if err != nil {
		return nil, err
	}
	binaries, err := readBinaries(filepath.Join(o.Dist, "artifacts.json"), o.Root)
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return nil, err
	}
	mainDir := filepath.Join(o.Out, "cli")
	if err := writeMain(mainDir, o.Root, version); err != nil {
		return nil, err
	}
	written := []string{mainDir}
	for _, p := range platforms {
		bins, ok := binaries[p.goos+"/"+p.goarch]
		if !ok {
			continue
		}
		dir := filepath.Join(o.Out, p.dirName())
		if err := writePlatform(dir, p, version, bins); err != nil {
			return nil, err
		}
		written = append(written, dir)
	}
	return written, nil
}

// readVersion is the release's version from goreleaser's metadata.json:
// semver without the tag's "v" (0.3.0, or 0.3.0-SNAPSHOT-1a2b3c4), as npm
// wants it.
func readVersion(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	var meta struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	if meta.Version == "" {
		return "", fmt.Errorf("%s: no version", file)
	}
	return strings.TrimPrefix(meta.Version, "v"), nil
}

// readBinaries are the built binaries by "GOOS/GOARCH", each platform's
// by command name. Every platform built must have all six commands.
func readBinaries(file, root string) (map[string]map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var all []artifact
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	byPlatform := map[string]map[string]string{}
	for _, a := range all {
		if a.Type != "Binary" {
			continue
		}
		name := path.Base(a.Name)
		if !slices.Contains(commands, name) {
			return nil, fmt.Errorf("%s: a binary %q that is none of the commands %v", file, a.Name, commands)
		}
		key := a.Goos + "/" + a.Goarch
		if byPlatform[key] == nil {
			byPlatform[key] = map[string]string{}
		}
		p := a.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		byPlatform[key][name] = p
	}
	if len(byPlatform) == 0 {
		return nil, fmt.Errorf("%s: no binaries", file)
	}
	for key, bins := range byPlatform {
		if !slices.ContainsFunc(platforms, func(p platform) bool { return p.goos+"/"+p.goarch == key }) {
			return nil, fmt.Errorf("%s: binaries for %s, which is not a release platform (platforms.go)", file, key)
		}
		for _, c := range commands {
			if bins[c] == "" {
				return nil, fmt.Errorf("%s: no %s binary for %s", file, c, key)
			}
		}
	}
	return byPlatform, nil
}

// manPages are the man pages of share/, which the main package names in
// its man field (npm links them for a global install).
var manPages = []string{"share/man/man1/lease.1", "share/man/man1/pool.1", "share/man/man1/pool-run.1"}

// writeMain writes the main package: a bin entry (a shim) per command,
// the README, and share/ (man pages and completions).
func writeMain(dir, root, version string) error {
	m := manifest{
		Name:        mainName,
		Version:     version,
		Description: "Leases and pools for scarce resources shared by concurrent processes: the lease, pool and pool-run commands, and their helpers",
		Bin:         map[string]string{},
		Man:         manPages,
		Files:       []string{"bin/", "share/", "README.md"},
		OS:          uniqueOS(),
		// Exactly this version of each: the shims and the binaries are
		// one release.
		OptionalDependencies: map[string]string{},
	}
	for _, c := range commands {
		m.Bin[c] = "bin/" + c
		if err := writeFile(filepath.Join(dir, "bin", c), []byte(shimFor(c)), 0o755); err != nil {
			return err
		}
	}
	for _, p := range platforms {
		m.OptionalDependencies[p.packageName()] = version
	}
	if err := copyFile(filepath.Join(root, "README.md"), filepath.Join(dir, "README.md"), 0o644); err != nil {
		return err
	}
	share := filepath.Join(root, "share")
	err := filepath.WalkDir(share, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		return copyFile(p, filepath.Join(dir, rel), 0o644)
	})
	if err != nil {
		return fmt.Errorf("the man pages and completions: %w", err)
	}
	for _, page := range manPages {
		if _, err := os.Stat(filepath.Join(dir, page)); err != nil {
			return fmt.Errorf("the man page %s: %w", page, err)
		}
	}
	return writeManifest(dir, m)
}

// writePlatform writes p's package: its six binaries in bin/, which the
// main package's shims run.
func writePlatform(dir string, p platform, version string, bins map[string]string) error {
	m := manifest{
		Name:            p.packageName(),
		Version:         version,
		Description:     fmt.Sprintf("The durable-lease executables for %s on %s, installed by %s", p.os, p.cpu, mainName),
		Files:           []string{"bin/"},
		OS:              []string{p.os},
		CPU:             []string{p.cpu},
		PreferUnplugged: true, // yarn: executables must be real files
	}
	for _, c := range commands {
		if err := copyFile(bins[c], filepath.Join(dir, "bin", c), 0o755); err != nil {
			return err
		}
	}
	readme := fmt.Sprintf("# %s\n\nThe `lease`, `pool` and `pool-run` executables and their helpers for %s on %s.\nInstall %s, which runs them; it depends on this package where it fits.\n", p.packageName(), p.os, p.cpu, mainName)
	if err := writeFile(filepath.Join(dir, "README.md"), []byte(readme), 0o644); err != nil {
		return err
	}
	return writeManifest(dir, m)
}

func uniqueOS() []string {
	var out []string
	for _, p := range platforms {
		if !slices.Contains(out, p.os) {
			out = append(out, p.os)
		}
	}
	slices.Sort(out)
	return out
}

func writeManifest(dir string, m manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, "package.json"), append(data, '\n'), 0o644)
}

func writeFile(name string, data []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(name, data, mode); err != nil {
		return err
	}
	return os.Chmod(name, mode) // whatever the umask
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	err = errors.Join(err, out.Close())
	if err != nil {
		return err
	}
	return os.Chmod(dst, mode)
}
