package clidoc

import (
	"os"
	"path/filepath"
)

//go:generate go run gen.go

// Write writes [Files] under root, the checkout, and removes what else
// share/ holds, so that a verb or a command removed takes its files along.
func Write(root string) error {
	files, err := Files()
	if err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(root, "share")); err != nil {
		return err
	}
	for name, data := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
