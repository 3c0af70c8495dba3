package cliparse

// Scan is scan, for the tests of package cliparse_test.
func Scan(grammar any, args []string) (cmd Command, help bool, err error) { return scan(grammar, args) }

// ErrUnreadable is errUnreadable, for the tests of package cliparse_test.
var ErrUnreadable = errUnreadable

// VersionOf is versionOf, for the tests of package cliparse_test.
var VersionOf = versionOf
