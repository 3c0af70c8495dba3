package jsonout

import (
	"context"
	"errors"

	"github.com/durable-lease/durable-lease/internal/cliparse"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// Classify maps the errors the CLIs share (usage, pool and lease refusals,
// signals and the rest) to a stable code word and an exit status. A CLI
// checks its own errors first and falls back to Classify; together they
// are the only place a code or an exit status is decided.
func Classify(err error) (code string, exit int) {
	var se *pool.SlotError
	var ce *pool.ClaimError
	switch {
	case errors.Is(err, pool.ErrConfig), errors.Is(err, pool.ErrInvalid):
		return "usage", ExitUsage
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
	case errors.Is(err, pool.ErrQueueBusy):
		return "queue_busy", ExitInternal
	case errors.Is(err, cliparse.ErrUsage), errors.Is(err, lease.ErrInvalid):
		return "usage", ExitUsage
	case errors.Is(err, lease.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout", ExitRefused // before held: a wait that ended matches both
	case errors.Is(err, lease.ErrHeld):
		return "held", ExitRefused
	case errors.Is(err, lease.ErrNotHeld):
		return "not_held", ExitRefused
	case errors.Is(err, lease.ErrExpired):
		return "expired", ExitRefused
	case errors.Is(err, lease.ErrTokenMismatch):
		return "token_mismatch", ExitRefused // before not_owner, which it also matches
	case errors.Is(err, lease.ErrNotOwner):
		return "not_owner", ExitRefused
	case errors.Is(err, lease.ErrNotDead):
		return "not_dead", ExitRefused
	case errors.Is(err, context.Canceled):
		return "interrupted", ExitRefused
	case errors.Is(err, lease.ErrGuardBusy):
		return "guard_busy", ExitInternal
	}
	return "internal", ExitInternal
}

// Describe is err's text for people: a cancellation, which the CLIs only
// get from a signal, says so instead of "context canceled".
func Describe(err error) string {
	if errors.Is(err, context.Canceled) {
		return "interrupted by a signal before it finished"
	}
	return err.Error()
}
