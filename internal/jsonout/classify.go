package jsonout

import (
	"context"
	"errors"

	"github.com/durable-lease/durable-lease/internal/cliparse"
	"github.com/durable-lease/durable-lease/lease"
)

// Classify maps the errors every CLI shares (usage, lease refusals, signals
// and the rest) to a stable code word and an exit status. A CLI checks its
// own errors first and falls back to Classify; together they are the only
// place a code or an exit status is decided.
func Classify(err error) (code string, exit int) {
	switch {
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
