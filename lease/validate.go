package lease

import (
	"encoding/json"
	"regexp"
	"strings"
)

// KindPattern is the shape of a lease kind. Kinds name files in the store,
// so the pattern is part of the on-disk format and is not configurable.
// [ValidKind] checks it without a regular expression, which every process
// would first have to compile (a {0,127} repetition is a large program;
// docs/FAST-PATHS.md); FuzzNameValidation holds the two to one answer.
const KindPattern = `^[a-z0-9][a-z0-9._-]{0,127}$`

// DefaultOwnerPattern accepts any safe token: a letter or digit, then up to
// 127 letters, digits or . _ : @ -.
const DefaultOwnerPattern = `^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`

// MinTTLMinutes is the shortest TTL accepted: 60 ms, far below any real
// use, yet enough for tests that let leases lapse on purpose; shorter ones
// (down to 5e-324) only expire before they can be used.
const MinTTLMinutes = 0.001

// MaxTTLMinutes bounds a lease's TTL at 366 days: a lock held longer is a bug,
// and larger values overflow timestamp arithmetic in other implementations.
const MaxTTLMinutes = 527_040

// MaxRecordBytes bounds what is read of a record file. Ours stay far
// below it (a 64 KiB payload, indented); a larger file is judged
// unreadable (unknown) without being read further.
const MaxRecordBytes = 1 << 20

// maxPayloadBytes bounds the payload so a record stays a small file that is
// read on every status and list.
const maxPayloadBytes = 64 << 10

// maxNameLen is the longest kind or default-fence owner (1 + 127).
const maxNameLen = 128

// ValidKind reports whether kind matches [KindPattern].
func ValidKind(kind string) bool {
	if len(kind) == 0 || len(kind) > maxNameLen || !isLowerAlnum(kind[0]) {
		return false
	}
	for i := 1; i < len(kind); i++ {
		if c := kind[i]; !isLowerAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// validDefaultOwner reports whether owner matches [DefaultOwnerPattern].
func validDefaultOwner(owner string) bool {
	if len(owner) == 0 || len(owner) > maxNameLen || !isAlnum(owner[0]) {
		return false
	}
	for i := 1; i < len(owner); i++ {
		if c := owner[i]; !isAlnum(c) && !strings.ContainsRune("._:@-", rune(c)) {
			return false
		}
	}
	return true
}

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
func isAlnum(c byte) bool      { return isLowerAlnum(c) || c >= 'A' && c <= 'Z' }

// OwnerFence decides which owners a store accepts. The zero value is the
// default fence, [DefaultOwnerPattern].
type OwnerFence struct {
	text string
	re   *regexp.Regexp // nil for the default fence, checked by hand
}

// Match reports whether owner is inside the fence.
func (f *OwnerFence) Match(owner string) bool {
	if f.re == nil {
		return validDefaultOwner(owner)
	}
	return f.re.MatchString(owner)
}

// String is the pattern as given.
func (f *OwnerFence) String() string {
	if f.text == "" {
		return DefaultOwnerPattern
	}
	return f.text
}

// NewOwnerFence compiles an owner fence; "" is [DefaultOwnerPattern]. A
// pattern must be anchored: see [CompileOwnerPattern].
func NewOwnerFence(pattern string) (*OwnerFence, error) {
	if pattern == "" || pattern == DefaultOwnerPattern {
		return &OwnerFence{text: DefaultOwnerPattern}, nil
	}
	re, err := CompileOwnerPattern(pattern)
	if err != nil {
		return nil, err
	}
	return &OwnerFence{text: pattern, re: re}, nil
}

// CompileOwnerPattern compiles an owner fence. An empty pattern is the
// default. A pattern must be anchored, starting with ^ and ending with an
// unescaped $, so a fence can never silently become a substring match.
func CompileOwnerPattern(pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		pattern = DefaultOwnerPattern
	}
	if !strings.HasPrefix(pattern, "^") || !strings.HasSuffix(pattern, "$") || escapedEnd(pattern) {
		return nil, invalidf("owner pattern %q must be anchored: start with ^ and end with $", pattern)
	}
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, invalidf("owner pattern %q: %v", pattern, err)
	}
	// Anchor the whole pattern as well, so a top-level alternation such as
	// ^a|b$ cannot match a string that merely starts with a or ends with b.
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		return nil, invalidf("owner pattern %q: %v", pattern, err)
	}
	return re, nil
}

// escapedEnd reports whether the final $ of pattern is escaped by an odd
// number of backslashes before it.
func escapedEnd(pattern string) bool {
	n := 0
	for i := len(pattern) - 2; i >= 0 && pattern[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func checkKind(kind string) error {
	if !ValidKind(kind) {
		return invalidf("kind %q must match %s", kind, KindPattern)
	}
	return nil
}

// ValidTTL reports whether ttlMinutes is a TTL a lease may be given:
// between MinTTLMinutes and MaxTTLMinutes. Records of other
// implementations are read whatever their TTL.
func ValidTTL(ttlMinutes float64) bool {
	return ttlMinutes >= MinTTLMinutes && ttlMinutes <= MaxTTLMinutes
}

// TTLRange says, for messages, what [ValidTTL] accepts.
// It is written out, as fmt's %g and %d print the two bounds (which a
// test checks), so that initialising the package formats nothing
// (TestNoFmtAtInit).
var TTLRange = "between 0.001 and 527040 minutes"

func checkTTL(ttlMinutes float64) error {
	if !ValidTTL(ttlMinutes) {
		return invalidf("ttl %v minutes must be %s", ttlMinutes, TTLRange)
	}
	return nil
}

func checkPayload(p json.RawMessage) error {
	if len(p) == 0 {
		return nil
	}
	if len(p) > maxPayloadBytes {
		return invalidf("payload is %d bytes; the limit is %d", len(p), maxPayloadBytes)
	}
	if !json.Valid(p) {
		return invalidf("payload is not valid JSON")
	}
	if d := jsonDepth(p); d > MaxPayloadDepth {
		return invalidf("payload nests %d levels deep; the limit is %d", d, MaxPayloadDepth)
	}
	return nil
}

// MaxPayloadDepth bounds how deeply a payload nests. Records are written
// indented, so a deep payload grows quadratically on disk (20 KB of
// brackets became a 200 MB record) and every read of it slows down.
const MaxPayloadDepth = 64

// jsonDepth is the deepest nesting of arrays and objects in valid JSON.
func jsonDepth(p []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range p {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}
