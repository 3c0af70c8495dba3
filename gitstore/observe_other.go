//go:build !unix

package gitstore

import (
	"errors"
	"io/fs"
)

func ownedByMe(fs.FileInfo) bool { return false }

// updateFile keeps no state file off Unix: sightings stay in memory.
func (o *observations) updateFile(func(map[string]sighting) bool) error {
	return errors.New("gitstore: no state file on this system")
}
