// Package testrun is what the module's test binaries do around their
// tests: [Main] (or [Run]) starts every child process of a test without
// the race detector's one-second pause at exit, and gives the binary a
// scratch cgroup for the pool-runs its tests start. Tests skip through
// [Skip] (an opt-in profile, a mode of the run) or [Missing] (a program
// or service this machine lacks: a skip on a developer's machine, a
// failure under CI=true, where .ci/run provides everything); gotestsum,
// as .ci/run runs the suite, lists the skips with their reasons.
// [Commands] gives the tests that run the installed binaries one build of
// ./cmd/... for the whole go test run.
//
// It is for tests only: _test.go files and test harness packages such as
// internal/testkit/clitest import it.
package testrun
