package lease

import (
	"encoding/hex"
	"fmt"
)

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
