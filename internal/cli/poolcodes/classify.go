// Package poolcodes classifies the errors of package pool for the CLIs
// that use pools (pool, pool-run): a stable code word and an exit status,
// then package outcome's for the rest. It is apart from outcome so that
// the lease CLI, which classifies through outcome alone, does not link
// package pool (internal/testkit/linkbudget).
package poolcodes

import (
	"errors"

	"github.com/durable-lease/durable-lease/internal/cli/outcome"
	"github.com/durable-lease/durable-lease/pool"
)

// Classify maps the errors the CLIs share (usage, pool and lease refusals,
// signals and the rest) to a stable code word and an exit status: those
// of package pool here, then [outcome.Classify]. A CLI checks its own
// errors first and falls back to Classify; together they are the only
// place a code or an exit status is decided.
func Classify(err error) (code string, exit int) {
	var se *pool.SlotError
	var ce *pool.ClaimError
	switch {
	case errors.Is(err, pool.ErrConfig), errors.Is(err, pool.ErrInvalid):
		return "usage", outcome.ExitUsage
	case errors.Is(err, pool.ErrStoreConflict):
		return "store_conflict", outcome.ExitUsage
	case errors.As(err, &ce):
		return ce.State, outcome.ExitRefused
	case errors.As(err, &se):
		return se.State, outcome.ExitRefused
	case errors.Is(err, pool.ErrSaturated):
		return "saturated", outcome.ExitRefused
	case errors.Is(err, pool.ErrTimeout):
		return "timeout", outcome.ExitRefused
	case errors.Is(err, pool.ErrQueueEntryLost):
		return "queue_entry_lost", outcome.ExitRefused
	case errors.Is(err, pool.ErrUnknownRequest):
		return "unknown_request", outcome.ExitRefused
	case errors.Is(err, pool.ErrLeaseLost):
		return "lease_lost", outcome.ExitRefused
	case errors.Is(err, pool.ErrQuarantined):
		return "quarantined", outcome.ExitRefused
	case errors.Is(err, pool.ErrNotQuarantined):
		return "not_quarantined", outcome.ExitRefused
	case errors.Is(err, pool.ErrQueueBusy):
		return "queue_busy", outcome.ExitInternal
	}
	return outcome.Classify(err)
}
