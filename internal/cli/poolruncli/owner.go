package poolruncli

import (
	"os"
	"path/filepath"
)

// defaultOwner is who holds the lease when neither --owner, the gate file
// nor LEASE_OWNER says: pool-run@ and the name of the worktree pool-run
// runs in (the nearest directory up from cwd with a .git, a directory or
// a linked worktree's file), else of cwd itself, as the example hooks name
// theirs (pre-push@wt-a, merge@wt-a). So pool status and lease status say
// which checkout holds what, where every run used to be ci-local. The name
// keeps letters, digits, '.', '_' and '-' (others become '_') and at most
// 100 of them, so that the owner matches the default owner pattern.
func defaultOwner(cwd string) string {
	where := cwd
	for d := cwd; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			where = d
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	name := []byte(filepath.Base(where))
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			name[i] = '_'
		}
	}
	return "pool-run@" + string(name[:min(len(name), 100)])
}
