//go:build ignore

// gen.go writes the man pages and completions of Files under share/ of the
// checkout (see package clidoc); go generate runs it. The build tag keeps
// it out of the package and of go install ./...

package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/durable-lease/durable-lease/internal/cli/clidoc"
)

func main() {
	err := clidoc.Write(filepath.Join("..", "..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, "clidoc:", err)
		os.Exit(1)
	}
}
