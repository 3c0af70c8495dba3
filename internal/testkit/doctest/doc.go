// Package doctest runs the shell blocks of README.md and of docs/*.md as a
// reader pastes them: in order, in one bash session per document, from
// the top of a clean copy of the checkout, with the commands installed
// from this checkout by the README's own line (CGO_ENABLED=0 go install
// ./cmd/...) into a directory put first on PATH.
//
// What runs, and how a block is marked:
//
//   - A fenced block whose info string is "sh" runs. Nothing else runs:
//     ```yaml, ```json, ```sql, a block without a language, an indented
//     block.
//   - An HTML comment on the line just before a fence changes that:
//     <!-- doctest: norun: REASON --> shows the block without running it
//     (the reason is required; keep such blocks rare: a system package, a
//     service of the reader's, a terminal);
//     <!-- doctest: etcd HOST:PORT --> runs the block against an etcd
//     started for the test (embedded, or ETCDTEST_BINARY's), with every
//     HOST:PORT in the block replaced by that member's address;
//     <!-- doctest: file PATH --> makes the block (of any language) a copy
//     of the checkout's file PATH, byte for byte, so that a file shown is
//     the file shipped.
//
// A block runs under bash's errexit and pipefail, so it fails as soon as
// one of its commands fails outside a condition; a command that is meant
// to fail is written so that its status is tested ("status=0; cmd ||
// status=$?" and a case on $status), never hidden behind "|| echo". A
// failing block fails the test with its document, line, text and output;
// the blocks after it do not run. Each document runs in a copy of its own
// with a HOME, a TMPDIR (the README none: its blocks must run where
// TMPDIR is unset), a host registry and stores of its own, and must leave
// no lease held in them when it ends.
package doctest
