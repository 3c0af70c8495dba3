// Command durable-lease-etcd runs the lease, pool and pool-run commands on
// an etcd store, and serves nothing else. Users do not run it by name:
// lease, pool and pool-run hand a command line whose store is an etcd://
// URL to it, so that the etcd client stays out of every directory-store
// call (internal/testkit/linkbudget holds them to that). They look for it in one
// place only, the directory they were started from: it must be installed
// beside them.
//
//	durable-lease-etcd lease|pool|pool-run ARGS...
package main

import (
	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/internal/cli/storehelper"
)

func main() { storehelper.Main(etcdstore.Scheme, etcdstore.Open) }
