package pooltop

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/charmbracelet/x/ansi"
)

// clean makes text from the pool (owners, attributes, log lines, errors)
// safe to draw: control characters, which could move the cursor or change
// the terminal's state, and format characters (bidi overrides) become
// spaces, and runs of white space one space.
func clean(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsControl(r) || unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) {
			if !space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteRune(r)
	}
	return strings.TrimRight(b.String(), " ")
}

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

// short is a duration in at most six cells, two units at most: 42s, 3m07s,
// 1h02m, 3d04h; "-" for none.
func short(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	case s < 100*86400:
		return fmt.Sprintf("%dd%02dh", s/86400, s%86400/3600)
	}
	return fmt.Sprintf("%dd", s/86400)
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

// brief is a slot's attributes in one line: key=value, keys sorted, a
// nested object as key=k:v,k:v.
func brief(attrs map[string]any) string {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+value(attrs[k]))
	}
	return clean(strings.Join(parts, " "))
}

func value(v any) string {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, k+":"+value(v[k]))
		}
		return strings.Join(parts, ",")
	case string:
		return v
	case nil:
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
