package poolruncli

import (
	"errors"
	"testing"

	"github.com/durable-lease/durable-lease/internal/cli/outcome"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
	"github.com/durable-lease/durable-lease/runner"
)

// TestExitStatusesAreTheCLIs: runner's statuses for a refusal, a usage
// error and an internal failure are those every CLI of the project
// exits with, which runner cannot import.
func TestExitStatusesAreTheCLIs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name          string
		runner, jsout int
	}{
		{"refused", runner.ExitRefused, outcome.ExitRefused},
		{"usage", runner.ExitUsage, outcome.ExitUsage},
		{"internal", runner.ExitInternal, outcome.ExitInternal},
	} {
		if c.runner != c.jsout {
			t.Errorf("%s: runner exits %d, the CLIs %d", c.name, c.runner, c.jsout)
		}
	}
}

// TestClassifyNamesTheRefusal: a run that acquired nothing exits with the
// code and status of the pool's or store's error, as the pool CLI would;
// every other result is left as runner decided it.
func TestClassifyNamesTheRefusal(t *testing.T) {
	t.Parallel()
	notAcquired := func(err error) *runner.Result {
		return &runner.Result{Exit: runner.ExitRefused, Code: runner.CodeNotAcquired, Err: &runner.AcquireError{Err: err}}
	}
	tests := []struct {
		name string
		r    *runner.Result
		code string
		exit int
	}{
		{"saturated", notAcquired(pool.ErrSaturated), "saturated", 1},
		{"timeout", notAcquired(pool.ErrTimeout), "timeout", 1},
		{"held", notAcquired(&lease.HeldError{}), "held", 1},
		{"queue busy", notAcquired(pool.ErrQueueBusy), "queue_busy", 3},
		{"store unavailable", notAcquired(lease.ErrUnavailable), "unavailable", 3},
		{"lost is runner's", &runner.Result{Exit: runner.ExitLost, Code: runner.CodeLost, Err: lease.ErrLost}, "lease_lost", 75},
		{"failed is runner's", &runner.Result{Exit: 4, Code: runner.CodeFailed}, "failed", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errBefore := tt.r.Err
			classify(tt.r)
			if tt.r.Code != tt.code || tt.r.Exit != tt.exit {
				t.Errorf("classified as %s (exit %d), want %s (exit %d)", tt.r.Code, tt.r.Exit, tt.code, tt.exit)
			}
			if !errors.Is(tt.r.Err, errBefore) {
				t.Errorf("classify replaced the error: %v", tt.r.Err)
			}
		})
	}
}
