package poolcli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
	"github.com/durable-lease/durable-lease/pool"
)

type historyCmd struct {
	Slot  string `placeholder:"ID" help:"Only this slot (default: every slot)."`
	Since string `placeholder:"DUR" help:"Only the last DUR: 90m, 36h, 7d (default: the whole log)."`
	JSON  bool   `name:"json" help:"Print one JSON object (per-slot figures, the sums, the events) instead of a table."`
}

// maxSince bounds --since: far more than any log holds.
const maxSince = 100 * 365 * 24 * time.Hour

// parseSince reads a duration of Go's form, or a whole number of days
// ("7d").
func parseSince(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int64
		n, err = strconv.ParseInt(days, 10, 64)
		if err == nil && (n <= 0 || n > int64(maxSince/(24*time.Hour))) {
			err = fmt.Errorf("out of range")
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 || d > maxSince {
		return 0, cliparse.Usagef("--since %q must be a positive duration such as 90m, 36h or 7d", s)
	}
	return d, nil
}

type historyOut struct {
	OK     bool                `json:"ok"`
	Name   string              `json:"name"`
	From   string              `json:"from"`
	Until  string              `json:"until"`
	Slots  []pool.SlotHistory  `json:"slots"`
	All    pool.SlotHistory    `json:"all"`
	Events []pool.HistoryEvent `json:"events"`
}

func (c *historyCmd) Run(e *env) error {
	since, err := parseSince(c.Since)
	if err != nil {
		return err
	}
	p, err := e.openRead()
	if err != nil {
		return err
	}
	h, err := p.History(e.ctx, pool.HistoryOptions{Slot: c.Slot, Since: since})
	if err != nil {
		return err
	}
	if c.JSON {
		out := historyOut{OK: true, Name: p.Config().Name, From: formatTime(h.From), Until: formatTime(h.Until),
			Slots: h.Slots, All: h.All, Events: h.Events}
		out.All.Slot = "all"
		if out.Events == nil {
			out.Events = []pool.HistoryEvent{}
		}
		return e.emit(out)
	}
	return writeHistory(e.stdout, p.Config().Name, h)
}

func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// writeHistory prints the figures as a table, one slot a row and the sums
// last, then each slot's last failure.
func writeHistory(w io.Writer, name string, h *pool.History) error {
	fmt.Fprintf(w, "pool %s, %s to %s (%s)\n\n", name, h.From.UTC().Format("2006-01-02 15:04"), h.Until.UTC().Format("2006-01-02 15:04"),
		span(h.Until.Sub(h.From)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "slot\tgrants\tused\thold p50\thold p90\twait p50\twait p90\tprovision p50\tfailures\tquarantined\t")
	row := func(label string, s pool.SlotHistory) {
		fmt.Fprintf(tw, "%s\t%d\t%.0f%%\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t\n", label, s.Grants, s.Utilisation*100,
			ms(s.HoldMedianMs), ms(s.HoldP90Ms), ms(s.WaitMedianMs), ms(s.WaitP90Ms), ms(s.ProvisionMedianMs), s.Failures, s.Quarantines)
	}
	for _, s := range h.Slots {
		row(fmt.Sprint(s.Slot), s)
	}
	if len(h.Slots) > 1 {
		row("all", h.All)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range h.Slots {
		if f := s.LastFailure; f != nil {
			fmt.Fprintf(w, "\nslot %v last failed at %s (%s): %s", s.Slot, f.At, f.Event, f.Error)
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// ms renders a duration in milliseconds for people, "-" for none.
func ms(v *int64) string {
	if v == nil {
		return "-"
	}
	return span(time.Duration(*v) * time.Millisecond)
}

// span renders d to two units at most: 850ms, 42s, 3m05s, 2h10m, 3d04h.
func span(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int64(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int64(d/time.Minute), int64(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int64(d/time.Hour), int64(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%02dh", int64(d/(24*time.Hour)), int64(d%(24*time.Hour)/time.Hour))
}
