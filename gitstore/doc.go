// Package gitstore keeps leases on a git remote: a [lease.Backend] whose
// records are commits on refs of any repository git can push to
// (git+file://, git+git://, git+ssh://, git+https://).
//
// Each kind is the ref refs/durable-lease/<ns>/leases/<kind>; its tip
// commit's tree holds the record (record.json, the directory store's
// JSON) and the kind's fence (fence). A release writes a tombstone commit
// (a tree with fence and released) instead of deleting the ref, so fences
// only grow. Every write is a compare-and-swap:
// git push --atomic --force-with-lease=<ref>:<tip read> of a commit whose
// parent is that tip, so a ref is never rewound and of racing writers
// exactly one wins; the losers read again and decide again. A write whose
// reply is lost is settled by reading the ref again, never by guessing.
// Journal events go to refs/durable-lease/<ns>/journal in the same atomic
// push as the change they record, one commit per event (the message is
// the event's JSON line).
//
// # Time: the server's Date, else the patience rule
//
// Committer dates are the client's say-so, so liveness never depends on
// them. Over smart HTTP the replies carry the server's Date: a record
// written and read with one is judged on the server's clock
// ([RuleServerDate], docs/PROTOCOL.md §10.6). The git protocol itself
// carries no server time, so over ssh, git:// and file:// the patience
// rule decides ([RulePatience]). A holder counts its TTL from the send
// time of its own confirmed write, on the host's boot clock where it has
// one. Any other process counts from the moment its host first saw the
// tip commit: a record is live until the host has watched the same tip
// unchanged for longer than the TTL plus a margin ([Margin]). Those
// moments outlive the process in a state file per store under the user's
// cache directory ([Options.StateDir]), so a contender's watch spans its CLI
// calls. A record seen for the first time is therefore held, never free,
// and an unreadable one is unknown. The cost: a takeover of a dead holder
// may take up to about two TTLs (the holder's last TTL plus the
// contender's own watch when it arrives late), and the rule assumes that
// clocks run at about the same rate, not that they agree.
//
// # Faults, and the shortest TTL
//
// A remote that restarts, asks to wait (HTTP 429 or 5xx) or is slow
// leaves the lease safe on it and only makes renewals late; a holder
// tries again until its TTL runs out. How late a renewal may be through
// such a fault is the store's renewal gap ([Backend.RenewalGap]): an
// [Outage] and the round trips of two renewals at [RoundTrip] each. It
// sets the shortest TTL a holder and pool-run keep.
package gitstore
