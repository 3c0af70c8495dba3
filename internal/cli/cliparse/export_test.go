package cliparse

// VersionOf is versionOf, for the tests of package cliparse_test.
var VersionOf = versionOf
