// Command pool-run holds a pool slot or a baton lease while a command or
// a gate file's phases run. See `pool-run --help`.
package main

import (
	"os"

	"github.com/durable-lease/durable-lease/internal/cli/poolruncli"
)

func main() { os.Exit(poolruncli.Process()) }
