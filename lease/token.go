package lease

import (
	"encoding/hex"
	"fmt"
)

// Ref names one incarnation of a lease as its holder knows it: the kind,
// the owner that acquired it and the token minted then. [Store.Heartbeat]
// and [Store.Release] take it whole, so that the three strings cannot be
// passed in the wrong order.
type Ref struct {
	Kind, Owner, Token string
}

// Ref is the reference of the incarnation r records.
func (r *Record) Ref() Ref { return Ref{Kind: r.Kind, Owner: r.Owner, Token: r.Token} }

// RandomHex returns 2n hex digits from the system's secure random source,
// for tokens and for the unique names of a backend's temporary files.
func RandomHex(n int) string {
	buf := make([]byte, n)
	if err := secureRandom(buf); err != nil {
		panic(fmt.Sprintf("lease: no secure randomness: %v", err)) // never fails on supported platforms
	}
	return hex.EncodeToString(buf)
}

// NewToken returns a fresh fencing token: 128 random bits as 32 hex digits.
func NewToken() string { return RandomHex(16) }

// TokenFingerprint names a token without giving it away: "sha256:" and
// the first 12 hex digits of its SHA-256. Two outputs showing the same
// fingerprint name the same incarnation of a lease; neither can be used
// to heartbeat or release it.
func TokenFingerprint(token string) string {
	if token == "" {
		return ""
	}
	sum := sha256Sum([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:6])
}
