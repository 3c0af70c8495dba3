package pool

// The events of pool.log (docs/PROTOCOL.md §6.9), one name each. The
// Node tool writes the same names (the quarantine and probe events are
// this implementation's alone, PROTOCOL §6.9), so they are part of the
// store's format: never rename one.
const (
	// EventGranted: a slot was handed to a waiter (with its provision outcome).
	EventGranted = "granted"
	// EventReleased: a slot lease was given back (forced: by someone else).
	EventReleased = "released"
	// EventRequestQueued: a request joined the queue.
	EventRequestQueued = "request_queued"
	// EventRequestWithdrawn: a waiter left the queue without a slot.
	EventRequestWithdrawn = "request_withdrawn"
	// EventRequestAbandoned: an async request was given up (every slot quarantined).
	EventRequestAbandoned = "request_abandoned"
	// EventQueueEntryDroppedStale: a silent waiter's entry was dropped from the queue.
	EventQueueEntryDroppedStale = "queue_entry_dropped_stale"
	// EventQueueLockRecovered: the queue lock of a dead holder was released.
	EventQueueLockRecovered = "queue_lock_recovered"
	// EventSlotsProbed: a round of health checks ended.
	EventSlotsProbed = "slots_probed"
	// EventSlotProbeOK: a slot passed its health check.
	EventSlotProbeOK = "slot_probe_ok"
	// EventSlotProbeFailed: a slot failed its health check.
	EventSlotProbeFailed = "slot_probe_failed"
	// EventSlotReaped: an expired slot lease was reaped.
	EventSlotReaped = "slot_reaped"
	// EventSlotTakeoverOnGrant: an expired slot lease was taken over to grant it.
	EventSlotTakeoverOnGrant = "slot_takeover_on_grant"
	// EventSlotTakeoverOnReprovision: an expired slot lease was taken over to reprovision it.
	EventSlotTakeoverOnReprovision = "slot_takeover_on_reprovision"
	// EventSlotTakeoverOnQuarantine: an expired slot lease was taken over to quarantine it.
	EventSlotTakeoverOnQuarantine = "slot_takeover_on_quarantine"
	// EventSlotReprovisionFailed: reprovisioning a slot failed.
	EventSlotReprovisionFailed = "slot_reprovision_failed"
	// EventSlotReprovisioned: a slot was reprovisioned.
	EventSlotReprovisioned = "slot_reprovisioned"
	// EventSlotQuarantined: a slot was taken out of service.
	EventSlotQuarantined = "slot_quarantined"
	// EventSlotUnquarantined: a slot was put back in service.
	EventSlotUnquarantined = "slot_unquarantined"
	// EventSlotUnquarantineFailed: putting a slot back in service failed.
	EventSlotUnquarantineFailed = "slot_unquarantine_failed"
	// EventGrantResetFailed: a grant's reset command failed.
	EventGrantResetFailed = "grant_reset_failed"
	// EventGrantHealthFailed: a grant's health check failed.
	EventGrantHealthFailed = "grant_health_failed"
	// EventGrantLeaseLostReset: a slot's lease was lost while its reset ran.
	EventGrantLeaseLostReset = "grant_lease_lost_during_reset"
	// EventStateFileReplaced: a writer replaced a queue.json or stats.json
	// it could not read (not JSON, not a regular file), losing what it held
	// (this implementation's alone).
	EventStateFileReplaced = "state_file_replaced"
)
