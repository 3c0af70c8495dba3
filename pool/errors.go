package pool

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/durable-lease/durable-lease/provision"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrConfig reports a pool file or option that is not valid.
	ErrConfig = errors.New("pool: invalid pool file")
	// ErrInvalid reports a bad argument (unknown slot, malformed request id).
	ErrInvalid = errors.New("pool: invalid argument")
	// ErrSaturated reports that no slot could be granted without waiting.
	ErrSaturated = errors.New("pool: saturated")
	// ErrTimeout reports that a wait for a slot ran out.
	ErrTimeout = errors.New("pool: timed out waiting for a slot")
	// ErrQueueEntryLost reports that a waiter's queue entry was dropped (its
	// process was silent for longer than the waiter stale bound).
	ErrQueueEntryLost = errors.New("pool: queue entry lost")
	// ErrProvisionFailed reports a failed provision or reset command.
	ErrProvisionFailed = errors.New("pool: provision failed")
	// ErrHealthFailed reports a failed health command.
	ErrHealthFailed = errors.New("pool: health check failed")
	// ErrLeaseLost reports that a slot lease expired or was taken over
	// before its grant could be handed out or claimed.
	ErrLeaseLost = errors.New("pool: lease lost")
	// ErrUnknownRequest reports a claim for a request that is neither queued
	// nor granted.
	ErrUnknownRequest = errors.New("pool: unknown request")
	// ErrQueueBusy reports that the queue lock stayed held past its bound.
	ErrQueueBusy = errors.New("pool: queue lock busy")
	// ErrQuarantined reports that every slot of the pool is quarantined,
	// so no waiter could ever be granted one.
	ErrQuarantined = errors.New("pool: quarantined")
	// ErrNotQuarantined reports an unquarantine of a slot in rotation.
	ErrNotQuarantined = errors.New("pool: not quarantined")
	// ErrGranted reports that a request a verb needs queued has left the
	// queue with a slot: its grant is fetched with [Pool.Claim]. It comes
	// as a [*GrantedError], which matches ErrQueueEntryLost too (the entry
	// is no longer queued).
	ErrGranted = errors.New("pool: granted")
)

// GrantProvisioning is the state of a request that has left the queue
// with a slot whose grant is still being prepared (claim prints it too).
const GrantProvisioning = "provisioning"

// GrantedError is a plumbing step, or a waiter, named a request that is
// no longer queued because it was granted a slot.
type GrantedError struct {
	RequestID string
	// Slot is the slot's id as the grant file (or the pool file) has it.
	Slot json.RawMessage
	// State is GrantReady (the grant file is written) or
	// GrantProvisioning.
	State string
}

func (e *GrantedError) Error() string {
	var id any
	_ = json.Unmarshal(e.Slot, &id)
	if e.State == GrantProvisioning {
		return fmt.Sprintf("%v: request %s was granted slot %v, which is being provisioned, and is no longer queued; claim fetches its grant once ready",
			ErrGranted, e.RequestID, id)
	}
	return fmt.Sprintf("%v: request %s was granted slot %v and is no longer queued; claim fetches its grant", ErrGranted, e.RequestID, id)
}

func (e *GrantedError) Unwrap() []error { return []error{ErrGranted, ErrQueueEntryLost} }

// QueueError carries a waiter's place in the queue when it was refused:
// saturated (no wait) or timed out.
type QueueError struct {
	Err       error
	RequestID string
	Position  int
	EtaMs     int64
	WaitedMs  int64
}

func (e *QueueError) Error() string {
	return fmt.Sprintf("%v: queue position %d, eta %s", e.Err, e.Position, EtaText(e.EtaMs))
}

func (e *QueueError) Unwrap() error { return e.Err }

// SlotError is a failure on one slot (provision, health, lease lost).
type SlotError struct {
	Err   error
	Slot  *Slot
	State string // the grant-file state: reset_failed, health_failed, lease_lost_during_reset
	Cause error
}

func (e *SlotError) Error() string {
	what := strings.TrimPrefix(e.Err.Error(), "pool: ")
	var exit *provision.ExitError
	switch {
	case errors.As(e.Cause, &exit):
		return fmt.Sprintf("slot %s: %s (exit status %d)", e.Slot.ID, what, exit.Status)
	case e.Cause != nil:
		return fmt.Sprintf("slot %s: %s: %v", e.Slot.ID, what, e.Cause)
	}
	return fmt.Sprintf("slot %s: %s", e.Slot.ID, what)
}

func (e *SlotError) Unwrap() error { return e.Err }

// FormatEta renders an ETA for the JSON "eta" field: [EtaText], the same
// text as the queue line on stderr, so that it agrees with "etaMs" beside
// it. (The Node tool's whole minutes, at least one, said "~1m" of 72 ms.)
func FormatEta(ms int64) string { return EtaText(ms) }

// ConfigError is a mistake in a pool file: the JSON path of what is wrong
// ($.slots[1].id, $ for the whole file), what is, and where it is in the
// file when the text is known. It matches ErrConfig.
type ConfigError struct {
	// File is the pool file as named, "" for [Parse].
	File string
	// Path is the JSON path of the member at fault: where its key is
	// for a member of an object.
	Path string
	// Line and Column (from 1, in characters) say where Path is, or
	// where the text stopped being JSON; 0 when unknown.
	Line, Column int
	Msg          string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(ErrConfig.Error())
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, " %s:%d:%d", e.File, e.Line, e.Column)
	case e.File != "":
		b.WriteString(" " + e.File)
	case e.Line > 0:
		fmt.Fprintf(&b, ": %d:%d", e.Line, e.Column)
	}
	fmt.Fprintf(&b, ": %s: %s", e.Path, e.Msg)
	return b.String()
}

func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

func configErr(path, format string, args ...any) error {
	return &ConfigError{Path: path, Msg: fmt.Sprintf(format, args...)}
}
