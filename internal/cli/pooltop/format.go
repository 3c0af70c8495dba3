package pooltop

import (
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/durable-lease/durable-lease/internal/cli/pooltext"
)

// The pool's text for people, shared with pool status's table.
var (
	clean = pooltext.Clean
	short = pooltext.Short
	brief = pooltext.Brief
)

// fit pads or truncates plain text s to exactly w cells, with an ellipsis
// where it was cut; right aligns it.
func fit(s string, w int, right bool) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) > w {
		s = ansi.Truncate(s, w, "…")
	}
	pad := strings.Repeat(" ", w-ansi.StringWidth(s))
	if right {
		return pad + s
	}
	return s + pad
}

// cut truncates plain text s to at most w cells, with an ellipsis.
func cut(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) > w {
		return ansi.Truncate(s, w, "…")
	}
	return s
}

// zone is where times are shown: nil for the local time zone (tests set
// UTC here instead of time.Local, which every goroutine of the process
// reads).
var zone *time.Location

// local is t in the zone times are shown in.
func local(t time.Time) time.Time {
	if zone != nil {
		return t.In(zone)
	}
	return t.Local()
}

// clock is an event's time: the time of day, or the date for an event of
// another day than now.
func clock(t, now time.Time) string {
	t, now = local(t), local(now)
	if y, m, d := t.Date(); y != now.Year() || m != now.Month() || d != now.Day() {
		return t.Format("Jan _2")
	}
	return t.Format("15:04:05")
}
