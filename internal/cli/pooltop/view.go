package pooltop

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// The smallest window the view draws in; a smaller one gets one line
// saying so.
const (
	MinWidth  = 60
	MinHeight = 10
)

// styles are the view's colours and weights, from a renderer that knows
// whether the terminal shows colours (none with NO_COLOR, or when stdout
// is not a terminal).
type styles struct {
	title, dim, header, key                lipgloss.Style
	free, held, unknown, quarantined       lipgloss.Style
	toneGood, toneWarn, toneBad, errorLine lipgloss.Style
}

func newStyles(r *lipgloss.Renderer) styles {
	c := func(n string) lipgloss.Style { return r.NewStyle().Foreground(lipgloss.Color(n)) }
	return styles{
		title:       r.NewStyle().Bold(true),
		dim:         r.NewStyle().Faint(true),
		header:      r.NewStyle().Bold(true).Underline(true),
		key:         r.NewStyle().Bold(true),
		free:        c("2"),
		held:        c("3"),
		unknown:     c("1").Bold(true),
		quarantined: c("5").Bold(true),
		toneGood:    c("2"),
		toneWarn:    c("3"),
		toneBad:     c("1"),
		errorLine:   c("1").Bold(true),
	}
}

// snapshot is one reading of the pool.
type snapshot struct {
	status *pool.Status
	events []event // the last lines of the log, oldest first
	logLen int     // how many lines the log has
	at     time.Time
}

// screen is what View draws from: the last good reading, and the last
// error if the latest reading failed.
type screen struct {
	name     string
	interval time.Duration
	snap     *snapshot
	err      error
	errAt    time.Time
}

// render draws the screen at width × height at time now (the pool's
// clock): at most height lines, none wider than width.
func (sc *screen) render(st styles, width, height int, now time.Time) string {
	if width < MinWidth || height < MinHeight {
		msg := fmt.Sprintf("pool top needs a %d×%d window (this one is %d×%d); q leaves", MinWidth, MinHeight, width, height)
		if ansi.StringWidth(msg) > width {
			msg = fmt.Sprintf("needs %d×%d (is %d×%d)", MinWidth, MinHeight, width, height)
		}
		return st.errorLine.Render(cut(msg, max(width, 1)))
	}
	var lines []string
	add := func(s string) { lines = append(lines, s) }

	clockText := local(now).Format("15:04:05")
	if sc.snap == nil {
		add(st.title.Render(cut("pool "+clean(sc.name), width-len(clockText)-1)) + " " + clockText)
		if sc.err != nil {
			add(st.errorLine.Render(cut("cannot read the pool: "+clean(sc.err.Error()), width)))
		} else {
			add(st.dim.Render("reading the pool…"))
		}
		return strings.Join(lines, "\n")
	}
	s := sc.snap.status

	// Title: the pool and its counts; then the store, the moving average
	// and the time.
	var free, held, unknown, quarantined int
	for _, sl := range s.Slots {
		switch {
		case sl.Quarantine != nil:
			quarantined++
		case sl.State == lease.Free:
			free++
		case sl.State == lease.Held:
			held++
		default:
			unknown++
		}
	}
	counts := []string{fmt.Sprintf("%d/%d held", held, len(s.Slots)), fmt.Sprintf("%d free", free)}
	if unknown > 0 {
		counts = append(counts, fmt.Sprintf("%d unknown", unknown))
	}
	if quarantined > 0 {
		counts = append(counts, fmt.Sprintf("%d quarantined", quarantined))
	}
	counts = append(counts, fmt.Sprintf("%d waiting", len(s.Queue)))
	add(st.title.Render(cut("pool "+clean(sc.name)+" · "+strings.Join(counts, " · "), width)))
	avg := " · avg hold " + short(time.Duration(s.MovingAvgMs)*time.Millisecond)
	room := width - len(clockText) - 1
	where := cut("store "+clean(s.Store), room-ansi.StringWidth(avg)) + avg
	add(st.dim.Render(fit(where, room, false)) + " " + clockText)

	// Rows: the sections' headers, the title, the store line and the
	// footer are fixed; slots come first, then the queue, then events.
	rows := height - 6
	reserveQ, reserveE := min(len(s.Queue), 2), min(len(sc.snap.events), 2)
	if rows-reserveQ-reserveE < 2 { // a small window: a line each at least
		reserveQ, reserveE = min(len(s.Queue), 1), min(len(sc.snap.events), 1)
	}
	nSlots := min(len(s.Slots), max(1, rows-reserveQ-reserveE))
	rows -= nSlots
	nQueue := min(len(s.Queue), max(0, rows-reserveE))
	rows -= nQueue
	nEvents := min(len(sc.snap.events), max(0, rows))

	rows -= nEvents
	gap := func() { // a blank line between sections, when there is room
		if rows > 0 {
			add("")
			rows--
		}
	}
	lines = append(lines, sc.slotLines(st, width, nSlots, now)...)
	gap()
	lines = append(lines, sc.queueLines(st, width, nQueue, now)...)
	gap()
	lines = append(lines, sc.eventLines(st, width, nEvents, now)...)

	// Footer: the keys, and when the pool was read or why it could not be.
	foot := st.key.Render("q") + st.dim.Render(" leaves · ")
	room = width - ansi.StringWidth("q leaves · ")
	if sc.err != nil {
		foot += st.errorLine.Render(cut(fmt.Sprintf("read failed %s: %s (showing %s)",
			clock(sc.errAt, now), clean(sc.err.Error()), clock(sc.snap.at, now)), room))
	} else {
		foot += st.dim.Render(cut(fmt.Sprintf("read %s · redrawn on every change, re-read every %s",
			clock(sc.snap.at, now), sc.interval), room))
	}
	for len(lines) < height-1 {
		add("")
	}
	add(foot)
	return strings.Join(lines, "\n")
}

// column is one column of a table: its header, its width and alignment.
type column struct {
	head  string
	w     int
	right bool
}

// row joins cells, each fitted to its column, with one space between
// them; style colours the cell of column i (nil for none).
func row(cols []column, cells []string, style func(i int, cell string) string) string {
	last := -1 // the last column with text: no padding after it
	for i, c := range cols {
		if c.w > 0 && i < len(cells) && cells[i] != "" {
			last = i
		}
	}
	var b strings.Builder
	for i, c := range cols[:last+1] {
		if c.w <= 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		cell := cells[i]
		if i == last && !c.right {
			cell = cut(cell, c.w)
		} else {
			cell = fit(cell, c.w, c.right)
		}
		if style != nil {
			cell = style(i, cell)
		}
		b.WriteString(cell)
	}
	return b.String()
}

func header(st styles, cols []column) string {
	heads := make([]string, len(cols))
	for i, c := range cols {
		heads[i] = c.head
	}
	return st.header.Render(row(cols, heads, nil))
}

// spread gives the width left beside the fixed columns to the flexible
// ones (the zero-width columns at the indices in flex), in order, each up
// to its cap while the later ones keep their minimums; a flexible column
// that cannot have its minimum is dropped.
func spread(cols []column, width int, flex []int, mins, caps []int) {
	left := width
	for _, c := range cols {
		if c.w > 0 {
			left -= c.w + 1 // the column and the space before the next
		}
	}
	for k, i := range flex {
		rest := 0
		for _, m := range mins[k+1:] {
			rest += m + 1
		}
		w := min(caps[k], left-rest)
		if w < mins[k] {
			w = min(caps[k], left) // the later ones will be dropped
		}
		if w < mins[k] {
			cols[i].w = 0
			continue
		}
		cols[i].w = w
		left -= w + 1
	}
}

const (
	colSlot = iota
	colState
	colHolder
	colHeld
	colExpires
	colFence
	colToken
	colAttrs
)

func (sc *screen) slotLines(st styles, width, n int, now time.Time) []string {
	s := sc.snap.status
	idW, fenceW := len("SLOT"), len("FENCE")
	for _, sl := range s.Slots {
		idW = max(idW, min(ansi.StringWidth(clean(sl.Slot.ID)), 12))
		if sl.Record != nil {
			fenceW = max(fenceW, len(strconv.FormatInt(sl.Record.Fence, 10)))
		}
	}
	holderW := 8
	for _, sl := range s.Slots {
		holderW = max(holderW, ansi.StringWidth(clean(sl.Holder)))
	}
	tokenW := 8 // the fingerprint's first hex digits: enough to tell grants apart
	if width >= 100 {
		tokenW = 12
	}
	cols := []column{
		{"SLOT", idW, false}, {"STATE", len("quarantined"), false}, {"HOLDER", 0, false},
		{"HELD", 6, true}, {"EXPIRES", 7, true}, {"FENCE", fenceW, true}, {"TOKEN", tokenW, false}, {"ATTRIBUTES", 0, false},
	}
	spread(cols, width, []int{colHolder, colAttrs}, []int{8, 8}, []int{min(holderW, 32), 200})
	out := []string{header(st, cols)}
	for i, sl := range s.Slots {
		if i == n-1 && n < len(s.Slots) && n > 1 {
			out = append(out, st.dim.Render(cut(fmt.Sprintf("… and %d more slots (a taller window shows them)", len(s.Slots)-i), width)))
			break
		}
		if i >= n {
			break
		}
		cells, stateStyle := slotCells(sl, now), st.unknown
		cells[colToken] = cells[colToken][:min(len(cells[colToken]), tokenW)]
		switch {
		case sl.Quarantine != nil:
			stateStyle = st.quarantined
		case sl.State == lease.Free:
			stateStyle = st.free
		case sl.State == lease.Held:
			stateStyle = st.held
		}
		if sl.Quarantine != nil {
			// The reason takes the place of the holder and what follows.
			q := sl.Quarantine
			text := "reason: " + clean(q.Reason)
			if q.Failures > 0 {
				text += fmt.Sprintf(" (%d failures in a row)", q.Failures)
			}
			if q.By != "" {
				text += " · by " + clean(q.By)
			}
			lead := row(cols[:colHolder], cells, func(i int, c string) string {
				if i == colState {
					return stateStyle.Render(c)
				}
				return c
			})
			out = append(out, lead+" "+cut(text, width-ansi.StringWidth(lead)-1))
			continue
		}
		out = append(out, row(cols, cells, func(i int, c string) string {
			switch i {
			case colState:
				return stateStyle.Render(c)
			case colToken, colAttrs:
				return st.dim.Render(c)
			}
			return c
		}))
	}
	return out
}

// slotCells are one slot's cells, in the columns' order.
func slotCells(sl pool.SlotStatus, now time.Time) []string {
	state := string(sl.State)
	if sl.Quarantine != nil {
		state = "quarantined"
	}
	cells := []string{clean(sl.Slot.ID), state, "", "", "", "", "", brief(sl.Slot.Attributes)}
	rec := sl.Record
	if rec == nil {
		return cells
	}
	if rec.Corrupt {
		cells[colHolder] = "(unreadable record)"
		return cells
	}
	cells[colHolder] = clean(sl.Holder)
	if !rec.AcquiredAt.IsZero() {
		cells[colHeld] = short(now.Sub(rec.AcquiredAt))
	}
	if exp, err := lease.ParseTime(sl.ExpiresAt); err == nil && sl.ExpiresAt != "" {
		if left := exp.Sub(now); left > 0 && sl.State == lease.Held {
			cells[colExpires] = short(left)
		} else {
			cells[colExpires] = "expired"
		}
	}
	if rec.Fence > 0 {
		cells[colFence] = strconv.FormatInt(rec.Fence, 10)
	}
	// Never the token itself: its fingerprint, as status and list show it.
	cells[colToken] = strings.TrimPrefix(lease.TokenFingerprint(rec.Token), "sha256:")
	return cells
}

func (sc *screen) queueLines(st styles, width, n int, now time.Time) []string {
	s := sc.snap.status
	if len(s.Queue) == 0 {
		return []string{st.header.Render("QUEUE") + st.dim.Render(" empty: a request is granted at once while a slot is free")}
	}
	waiterW := 10
	for _, q := range s.Queue {
		waiterW = max(waiterW, ansi.StringWidth(waiterName(q)))
	}
	cols := []column{{"QUEUE", 5, true}, {"WAITER", 0, false}, {"WAITED", 6, true}, {"ETA", 6, true}, {"MODE", 8, false}, {"REQUEST", 0, false}}
	spread(cols, width, []int{1, 5}, []int{10, 10}, []int{min(waiterW, 40), 40})
	out := []string{header(st, cols)}
	for i, q := range s.Queue {
		if i == n-1 && n < len(s.Queue) && n > 1 {
			out = append(out, st.dim.Render(cut(fmt.Sprintf("… and %d more waiting", len(s.Queue)-i), width)))
			break
		}
		if i >= n {
			break
		}
		waiter := waiterName(q)
		waited := ""
		if t, err := lease.ParseTime(q.EnqueuedAt); err == nil {
			waited = short(now.Sub(t))
		}
		cells := []string{"#" + strconv.Itoa(q.Position.Position), waiter, waited, pool.EtaText(q.EtaMs), clean(q.Mode), clean(q.ID)}
		out = append(out, row(cols, cells, func(i int, c string) string {
			if i == 5 {
				return st.dim.Render(c)
			}
			return c
		}))
	}
	return out
}

func (sc *screen) eventLines(st styles, width, n int, now time.Time) []string {
	evs := sc.snap.events
	head := "EVENTS"
	switch {
	case sc.snap.logLen == 0:
		return []string{st.header.Render(head) + st.dim.Render(" none yet in the pool's log")}
	case n < sc.snap.logLen:
		head += fmt.Sprintf(" (latest %d of %d)", n, sc.snap.logLen)
	}
	out := []string{st.header.Render(cut(head, width))}
	nameW := 0
	for i := len(evs) - 1; i >= len(evs)-n; i-- {
		nameW = max(nameW, min(ansi.StringWidth(evs[i].Name), 24))
	}
	for i := len(evs) - 1; i >= len(evs)-n && i >= 0; i-- { // the newest first
		ev := evs[i]
		at := "        "
		if !ev.At.IsZero() {
			at = fit(clock(ev.At, now), 8, false)
		}
		name := fit(ev.Name, nameW, false)
		switch ev.Tone {
		case good:
			name = st.toneGood.Render(name)
		case warn:
			name = st.toneWarn.Render(name)
		case bad:
			name = st.toneBad.Render(name)
		}
		out = append(out, st.dim.Render(at)+" "+name+" "+cut(ev.Text, width-8-nameW-2))
	}
	return out
}

// waiterName is a queue entry's owner, and its session when it has
// another name.
func waiterName(q pool.QueuedEntry) string {
	w := clean(q.Owner)
	if q.Session != "" && q.Session != q.Owner {
		w += " (" + clean(q.Session) + ")"
	}
	return w
}
