package runner

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	quickRaceExit()
	os.Exit(m.Run())
}

// quickRaceExit shortens the pause of a -race program at its exit: by
// default (GORACE atexit_sleep_ms) it sleeps a second first, so that a
// race found by another goroutine gets reported. Every guardian these
// tests start is this test binary, and a run that copies the work's
// output waits for its guardian to exit: a second per run. 50 ms still
// lets a report be written. A GORACE of the caller's is kept.
func quickRaceExit() {
	if _, set := os.LookupEnv("GORACE"); !set {
		_ = os.Setenv("GORACE", "atexit_sleep_ms=50")
	}
}
