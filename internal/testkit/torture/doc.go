// Package torture is a stress harness of real processes for packages lease
// and pool, and a checker that replays what they did.
//
// The harness (Run) re-executes the current binary as client processes
// (RunClientFromEnv, selected by the DL_TORTURE_ROLE variable, dispatched by
// the test's TestMain). Each client loops acquire, a fenced critical section
// on a shared resource file, heartbeats and release, on one lease kind or on
// the slots of a pool, and appends one JSON line per event to a journal of
// its own: a "begin" line just before each call and an "end" line with the
// outcome just after it returns, each with wall-clock timestamps. The
// supervisor SIGKILLs a random tenth of the clients, some at random
// moments and some at moments it watches for (holding the kind's guard,
// with a record temporary written, inside the critical section, while a
// provision command runs), and classifies where each kill landed from what
// the dead process left in the store.
//
// Check replays every journal against the store's history (reaped.log,
// pool.log, the final records, the resource files) and reports every
// violation of mutual exclusion, of expiry, of journaling and of progress.
// The rules are written down in docs/RELIABILITY.md.
package torture
