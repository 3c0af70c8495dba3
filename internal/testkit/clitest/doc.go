// Package clitest runs the project's command-line tools the way users run
// them: as separate processes driven by testscript scripts.
//
// The scripts live in testdata/script at the repository root, one file per
// verb or concern, named after the CLI they exercise (lease_*.txtar,
// pool_*.txtar, poolrun_*.txtar) or the concern (store_*.txtar,
// cli_*.txtar). TestMain registers every CLI in one map (Commands in
// harness.go), so a script runs it with
// `exec lease ...` exactly as a shell would, with its own environment,
// working directory, stdout, stderr and exit status.
//
// Besides the testscript builtins the harness offers a few commands for the
// one-JSON-object-on-stdout contract the CLIs share:
//
//	exits STATUS PROGRAM [ARGS...] run PROGRAM like exec; it must exit with STATUS
//	onejson [-pretty]              stdout is exactly one JSON object (one line unless -pretty)
//	json [-in FILE] [-line N] PATH [OP] [VALUE]
//	                               assert a field of stdout (or of FILE, or of its line N)
//	jsonenv [-in FILE] [-line N] NAME PATH
//	                               store a field in the environment variable NAME
//	jsondelta [-in FILE] [-line N] FROM TO MS|MIN..MAX
//	                               timestamp field TO is MS (or MIN to MAX) milliseconds after FROM
//	sleep DURATION                 pause, e.g. `sleep 1500ms`
//	snapshot                       write the store's contents as the directory
//	                               store's files under $WORK/store (on etcd;
//	                               a no-op on the directory store)
//
// PATH is a dotted path such as .record.owner or .leases[0].kind; "." is the
// whole value. json with PATH alone asserts the field is present (negated:
// absent). With PATH VALUE it asserts equality: a string field is compared
// with VALUE literally, any other field with VALUE read as JSON (so
// `json .ok false`, `json .record.ttlMinutes 0.5`, `json .payload null`).
// OP is one of == != < <= > >= (numbers), =~ (regular expression on a
// string field), len (length of an array, object or string) and type
// (string, number, bool, null, array, object).
//
// The scripts run on the directory store here, and those about leases,
// pools and pool-run (lease_*, pool_*, poolrun_*) also on an embedded etcd
// in ./etcd when DL_TEST_BACKEND=etcd. The condition [etcd] is true there:
// a script runs snapshot before it reads the store's files (so on etcd it
// reads the keys, laid out as files), guards what plants or damages files
// in the store with [!etcd], gives a line that differs on etcd an [etcd]
// variant, and sets LEASE_STORE only under [!etcd] (on etcd it is set for
// it, to a prefix of its own).
//
// Every script starts from testscript's clean environment: nothing such as
// LEASE_STORE or LEASE_OWNER_PATTERN leaks in from the developer's shell;
// TestScripts poisons those variables in its own process to prove it.
package clitest
