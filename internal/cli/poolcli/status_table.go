package poolcli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/durable-lease/durable-lease/internal/cli/pooltext"
	"github.com/durable-lease/durable-lease/lease"
)

// maxAttrs is how many characters of a slot's attributes a row shows.
const maxAttrs = 60

// writeStatus prints out for people: a line on the pool, the store, then
// a table of the slots and one of the queue. Times are from now, on the
// store's clock. Text from the pool (holders, attributes, reasons) is
// cleaned of control characters.
func writeStatus(w io.Writer, out statusOut, now time.Time) error {
	held, free, quarantined := 0, 0, 0
	for _, s := range out.Slots {
		switch s.State {
		case lease.Held:
			held++
		case stateQuarantined:
			quarantined++
		case lease.Free:
			free++
		}
	}
	fmt.Fprintf(w, "pool %s: %d/%d held, %d free", pooltext.Clean(out.Name), held, len(out.Slots), free)
	if quarantined > 0 {
		fmt.Fprintf(w, ", %d quarantined", quarantined)
	}
	fmt.Fprintf(w, "; %d waiting; average hold %s\n", len(out.Queue), pooltext.Short(time.Duration(out.MovingAvgMs)*time.Millisecond))
	fmt.Fprintf(w, "store %s\n\n", pooltext.Clean(out.Store))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tSTATE\tHOLDER\tEXPIRES\tATTRIBUTES")
	for _, s := range out.Slots {
		holder, expires := "-", "-"
		if s.Holder != nil {
			holder = pooltext.Clean(*s.Holder)
		}
		if s.ExpiresAt != nil && s.Quarantine == nil {
			expires = untilText(*s.ExpiresAt, now)
		}
		about := pooltext.Brief(s.Attrs)
		if q := s.Quarantine; q != nil {
			holder = pooltext.Clean(q.By)
			about = "reason: " + pooltext.Clean(q.Reason)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", pooltext.Clean(fmt.Sprint(s.SlotID)), s.State, holder, expires, clip(about, maxAttrs))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(out.Queue) == 0 {
		_, err := fmt.Fprintln(w, "\nno one is waiting")
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tWAITER\tMODE\tWAITED\tETA\tREQUEST")
	for _, q := range out.Queue {
		waiter := pooltext.Clean(q.Owner)
		if q.Session != "" && q.Session != q.Owner {
			waiter += " (" + pooltext.Clean(q.Session) + ")"
		}
		waited := "-"
		if t, err := lease.ParseTime(q.EnqueuedAt); err == nil {
			waited = pooltext.Short(now.Sub(t))
		}
		fmt.Fprintf(tw, "#%d\t%s\t%s\t%s\t%s\t%s\n", q.Position, waiter, pooltext.Clean(q.Mode), waited, q.Eta, pooltext.Clean(q.RequestID))
	}
	return tw.Flush()
}

// untilText says when a lease expires, from now: "in 4m58s", or how long
// ago it did.
func untilText(at string, now time.Time) string {
	t, err := lease.ParseTime(at)
	if err != nil {
		return "?"
	}
	if d := t.Sub(now); d >= 0 {
		return "in " + pooltext.Short(d)
	}
	return pooltext.Short(now.Sub(t)) + " ago"
}

// clip shortens s to n characters, marking a cut with "…".
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
