//go:build ignore

// gen_help.go writes help_gen.go (see package helpgen); go generate runs
// it. The build tag keeps it out of the package and of go install ./...

package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/durable-lease/durable-lease/internal/cli/leasecli/helpgen"
)

func main() {
	out := flag.String("o", "help_gen.go", "the file to write")
	flag.Parse()
	src, err := helpgen.Render()
	if err == nil {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helpgen:", err)
		os.Exit(1)
	}
}
