// Package gates loads and validates gate files, the declarative YAML format
// that `pool-run --gate FILE` runs.
//
// A gate file names either a slot pool (pool:) or a single baton lease
// (kind:) and lists the phases to run while holding it, in order, with the
// pool slot reset between phases. This package only reads the file,
// validates it and expands its env values; acquiring the lease and running
// the phases live elsewhere.
//
// Every problem is reported as an [*Error] carrying the file, the line and
// column of the offending YAML node and a message, and matches [ErrInvalid]
// with errors.Is.
//
// The accepted YAML is deliberately a subset: one document whose top level
// is a mapping, with no anchors (&), aliases (*), merge keys (<<) or tags
// (!!str, !custom). Tags are refused rather than honoured so that a value's
// type is always what it looks like; quote a value to make it a string.
package gates
