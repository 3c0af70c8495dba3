package dirpool

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/pool"
)

// The registry is kept only in directories of the user's that nobody else
// can write, reached without a symbolic link: one planted at
// ~/.local/state would make the CLI write where its owner chose.
func TestRegistryRefusesASymlinkedOrOpenDirectory(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	elsewhere := t.TempDir()
	cfgDir := t.TempDir()
	pf := filepath.Join(cfgDir, "pool.json")
	if err := os.WriteFile(pf, []byte(`{"name":"p","slots":[{"id":1}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := pool.LoadFile(pf)
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(t.TempDir(), "store")
	if err := os.MkdirAll(filepath.Join(home, ".local"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(home, ".local", "state")); err != nil {
		t.Fatal(err)
	}
	reg := RegistryDir(func(k string) string { return map[string]string{"HOME": home}[k] })
	if err := ClaimHostStore(c, store, reg, time.Now(), true); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("the registry was made through the link: %v", entries)
	}
	// A home anyone can write is no place for it either.
	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	reg = RegistryDir(func(k string) string { return map[string]string{"HOME": open}[k] })
	if err := ClaimHostStore(c, store, reg, time.Now(), true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(open, ".local")); err == nil {
		t.Error("the registry was made in a home anyone can write")
	}
	// A good home gets it, 0700 all the way down.
	good := t.TempDir()
	reg = RegistryDir(func(k string) string { return map[string]string{"HOME": good}[k] })
	if err := ClaimHostStore(c, store, reg, time.Now(), true); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(reg)
	if err != nil || len(entries) != 2 { // .lock and the registration
		t.Fatalf("registry %s: %v %v", reg, entries, err)
	}
	for _, d := range []string{".local", ".local/state", ".local/state/durable-lease", ".local/state/durable-lease/pools"} {
		if fi, err := os.Stat(filepath.Join(good, d)); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want 0700", d, fi, err)
		}
	}
	// A read from another store is refused while this one serves it, and
	// the same store reached through a link is no conflict.
	other := filepath.Join(t.TempDir(), "store")
	if err := os.MkdirAll(store, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := ClaimHostStore(c, other, reg, time.Now(), false); err == nil {
		t.Error("another store's read was not refused")
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(store, link); err != nil {
		t.Fatal(err)
	}
	if err := ClaimHostStore(c, link, reg, time.Now(), true); err != nil {
		t.Errorf("the same store through a link: %v", err)
	}
}
