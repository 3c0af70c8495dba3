//go:build ignore

// gen.go writes the npm packages of a goreleaser build (see package
// npmpkg): release/build.sh runs it. The build tag keeps it out of the
// package and of go install ./...

package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/durable-lease/durable-lease/internal/release/npmpkg"
)

func main() {
	dist := flag.String("dist", "dist", "goreleaser's output directory (its metadata.json and artifacts.json)")
	out := flag.String("out", "dist/npm", "the directory to write the packages in (emptied first)")
	root := flag.String("root", ".", "the checkout: README.md and share/, and where relative artifact paths start")
	flag.Parse()
	written, err := npmpkg.Generate(npmpkg.Options{Dist: *dist, Out: *out, Root: *root})
	if err != nil {
		fmt.Fprintln(os.Stderr, "npmpkg:", err)
		os.Exit(1)
	}
	for _, dir := range written {
		fmt.Println(dir)
	}
}
