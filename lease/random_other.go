//go:build !linux

package lease

import "crypto/rand"

// secureRandom fills b from the system's secure random source.
func secureRandom(b []byte) error {
	_, err := rand.Read(b)
	return err
}
