package lease

import "strings"

// IsStoreURL reports whether s has the form scheme://…, or begins with
// git+ (a git remote, which may be written scp-like: git+git@host:repo),
// forms no store directory path written by a user has (write ./name://
// or ./git+name for a directory of that name).
func IsStoreURL(s string) bool {
	if strings.HasPrefix(s, "git+") {
		return true
	}
	i := strings.Index(s, "://")
	if i <= 0 {
		return false
	}
	for j, c := range s[:i] {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (j == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}
