// Package pool hands out one slot of a fixed set (ports, a database, a cache
// index) to each caller, built on package lease with no resident broker.
//
// Waiters join a durable FIFO queue and grant themselves a slot when the free
// slots outnumber the live entries ahead of them; taking the slot is the
// slot's lease acquire, so a race for the last slot has one winner. Every
// grant runs the pool's provision and health commands before it is handed
// out, so a slot is clean when granted. Dead holders and silent waiters are
// reaped lazily by every operation. The on-disk layout is in
// docs/PROTOCOL.md.
package pool
