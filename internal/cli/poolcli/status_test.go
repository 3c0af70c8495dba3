package poolcli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// TestStatusOnATerminalIsATable: pool status prints its table when
// stdout is a terminal, and its JSON (format 2) when it is not, unless
// --format says otherwise.
func TestStatusOnATerminalIsATable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pool.json")
	if err := os.WriteFile(file, []byte(`{"name":"acme","slots":[{"id":1,"port":3000}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"LEASE_STORE", "LEASE_POOL_FILE", "LEASE_OWNER_PATTERN"} {
		t.Setenv(k, "")
	}
	args := []string{"--pool", file, "--store", filepath.Join(dir, "store"), "status"}

	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	var stderr bytes.Buffer
	code := Main(context.Background(), args, tty, &stderr)
	tty.Close()
	shown, _ := io.ReadAll(ptmx) // EIO once the terminal side is closed
	if code != 0 || !strings.Contains(string(shown), "pool acme: 0/1 held, 1 free; 0 waiting") ||
		!strings.Contains(string(shown), "SLOT") || strings.Contains(string(shown), `"ok"`) {
		t.Errorf("on a terminal: exit %d, stderr %q, shown:\n%s", code, stderr.String(), shown)
	}

	var out bytes.Buffer
	if code := Main(context.Background(), args, &out, &stderr); code != 0 || !strings.HasPrefix(out.String(), `{"ok":true,"format":2,`) {
		t.Errorf("in a pipe: exit %d, stdout %s", code, out.String())
	}
	ptmx2, tty2, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx2.Close()
	code = Main(context.Background(), append(args, "--format", "json"), tty2, &stderr)
	tty2.Close()
	shown, _ = io.ReadAll(ptmx2)
	if code != 0 || !strings.Contains(string(shown), `{"ok":true,"format":2,`) {
		t.Errorf("--format json on a terminal: exit %d, shown %q", code, shown)
	}
}
