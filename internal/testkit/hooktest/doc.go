// Package hooktest proves the ready-to-copy hooks in examples/hooks against
// the real programs: git, PostgreSQL, Redis, lefthook and pre-commit. It
// has no code of its own, only tests.
//
// TestMain builds lease, pool and pool-run from this module into a
// temporary directory and puts it first on PATH, so every hook, gate and
// provisioner runs the commands of this checkout. Each test copies the
// example files into a temporary repository (with a bare remote and, where
// needed, linked worktrees), isolates HOME, the git configuration, the
// lease store and pre-commit's cache in temporary directories, and drives
// it with `git push` exactly as a user would.
//
// The services come from the environment, as .ci/run (through
// .ci/services.sh) exports it:
//
//	DL_TEST_PGHOST, DL_TEST_PGPORT, DL_TEST_PGUSER   a PostgreSQL server the
//	                                                 tests may create and drop
//	                                                 databases on (trust auth)
//	DL_TEST_REDIS_HOST, DL_TEST_REDIS_PORT           a Redis server whose indexes
//	                                                 1 to 3 the tests flush
//	DL_TEST_LEFTHOOK                                 the lefthook binary (default:
//	                                                 .ci/tools/node_modules, then PATH)
//
// The tests hand them to the programs they start as PGHOST, PGPORT, PGUSER,
// REDIS_HOST and REDIS_PORT, the names the example provisioner reads.
// .ci/services.sh env prints both sets (the hooks' names, to try the hooks
// by hand); .ci/run exports only the DL_TEST_ ones (services.sh test-env),
// so that no other package's tests reach these servers by accident.
//
// A test whose service or program is missing (a variable unset, a server
// not answering, psql, redis-cli, git, lefthook or pre-commit not found) is
// skipped with a message naming what is missing, except when CI=true: then
// it fails, since .ci/run installs and starts all of them. To run the
// package by hand:
//
//	.ci/services.sh start && eval "$(.ci/services.sh env)"
//	go test -race -count=1 ./internal/testkit/hooktest/
//	.ci/services.sh stop
package hooktest
