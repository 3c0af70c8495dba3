// Package pooltext renders what a pool holds as text for people, the same
// in pool status's table and in pool top's view: text made safe for a
// terminal, short durations, a slot's attributes on one line.
package pooltext

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"
)

// Clean makes text from the pool (owners, attributes, log lines, errors)
// safe to draw: control characters, which could move the cursor or change
// the terminal's state, and format characters (bidi overrides) become
// spaces, and runs of white space one space.
func Clean(s string) string {
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

// Short is a duration in at most six cells, two units at most: 42s,
// 3m07s, 1h02m, 3d04h.
func Short(d time.Duration) string {
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

// Brief is a slot's attributes in one line: key=value, keys sorted, a
// nested object as key=k:v,k:v.
func Brief(attrs map[string]any) string {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+value(attrs[k]))
	}
	return Clean(strings.Join(parts, " "))
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
