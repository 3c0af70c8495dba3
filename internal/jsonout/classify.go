package jsonout

import (
	"errors"

	"github.com/durable-lease/durable-lease/internal/outcome"
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
		return "usage", ExitUsage
	case errors.Is(err, pool.ErrStoreConflict):
		return "store_conflict", ExitUsage
	case errors.As(err, &ce):
		return ce.State, ExitRefused
	case errors.As(err, &se):
		return se.State, ExitRefused
	case errors.Is(err, pool.ErrSaturated):
		return "saturated", ExitRefused
	case errors.Is(err, pool.ErrTimeout):
		return "timeout", ExitRefused
	case errors.Is(err, pool.ErrQueueEntryLost):
		return "queue_entry_lost", ExitRefused
	case errors.Is(err, pool.ErrUnknownRequest):
		return "unknown_request", ExitRefused
	case errors.Is(err, pool.ErrLeaseLost):
		return "lease_lost", ExitRefused
	case errors.Is(err, pool.ErrQuarantined):
		return "quarantined", ExitRefused
	case errors.Is(err, pool.ErrNotQuarantined):
		return "not_quarantined", ExitRefused
	case errors.Is(err, pool.ErrQueueBusy):
		return "queue_busy", ExitInternal
	}
	return outcome.Classify(err)
}

// Describe is err's text for people: a cancellation, which the CLIs only
// get from a signal, says so instead of "context canceled".
func Describe(err error) string { return outcome.Describe(err) }
