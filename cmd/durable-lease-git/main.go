// Command durable-lease-git runs the lease and pool-run commands on a git
// store (git+file://, git+ssh://, git+https://, git+git://: leases kept
// as refs of a git remote, package gitstore), and serves nothing else.
// Users do not run it by name: lease, pool and pool-run hand a command
// line whose store is a git+… URL to it, found in one place only, beside
// them. pool refuses a git store: it keeps leases and batons, not pools.
//
//	durable-lease-git lease|pool|pool-run ARGS...
package main

import (
	"github.com/durable-lease/durable-lease/gitstore"
	"github.com/durable-lease/durable-lease/internal/cli/storehelper"
)

func main() { storehelper.Main(gitstore.Scheme, gitstore.Open) }
