package pooltop

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// tone is how an event is coloured.
type tone int

const (
	plain tone = iota
	good       // a grant
	warn       // a takeover, a reap, a dropped waiter
	bad        // a failure
)

// event is one line of the pool's log, as the view shows it.
type event struct {
	At   time.Time // zero when the line has none that parses
	Name string
	Text string
	Tone tone
}

// parseEvent reads one log line (a JSON object with "at" and "event";
// see pool's logEvent). The fields every event of the pool carries come
// first, in words; any others follow as key=value.
func parseEvent(line json.RawMessage) event {
	var obj map[string]json.RawMessage
	if json.Unmarshal(line, &obj) != nil {
		return event{Name: "?", Text: clean(string(line)), Tone: bad}
	}
	str := func(k string) string {
		raw, ok := obj[k]
		if !ok {
			return ""
		}
		delete(obj, k)
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		var v any
		if json.Unmarshal(raw, &v) == nil && v == nil {
			return ""
		}
		return string(raw)
	}
	ev := event{Name: clean(str("event"))}
	if t, err := lease.ParseTime(str("at")); err == nil {
		ev.At = t
	}
	var words []string
	errText := str("error")
	reason := str("reason")
	// An error names its slot already (pool's SlotError).
	if s := str("slot_id"); s != "" && !strings.HasPrefix(errText, "slot "+s+":") {
		words = append(words, "slot "+s)
	}
	owner := str("owner")
	if e, ok := obj["entry"]; ok { // a dropped queue entry
		var entry struct{ Owner string }
		if json.Unmarshal(e, &entry) == nil && entry.Owner != "" {
			delete(obj, "entry")
			owner = entry.Owner
		}
	}
	if owner != "" {
		switch {
		case ev.Name == "granted":
			words = append(words, "to "+owner)
		case strings.HasPrefix(ev.Name, "request_"), strings.HasPrefix(ev.Name, "queue_"):
			words = append(words, owner) // the waiter
		default:
			words = append(words, "by "+owner) // who did it
		}
	}
	if s := str("session"); s != "" && s != owner {
		words = append(words, "("+s+")")
	}
	if p, ok := obj["previous"]; ok { // a takeover's or a reap's previous record, token and all
		delete(obj, "previous")
		var prev struct{ Owner string }
		if json.Unmarshal(p, &prev) == nil && prev.Owner != "" {
			words = append(words, "from "+prev.Owner)
		}
	}
	if s := str("position"); s != "" {
		words = append(words, "at #"+s)
	}
	if s := str("forced"); s == "true" {
		words = append(words, "(forced)")
	} else if s != "" && s != "false" {
		words = append(words, "forced="+s)
	}
	if s := str("mode"); s != "" && s != "blocking" {
		words = append(words, "("+s+")")
	}
	if s := str("by"); s != "" && s != owner {
		words = append(words, "by "+s)
	}
	// A grant's times, when they are long enough to matter.
	for _, f := range []struct{ key, text string }{{"waitedMs", "waited "}, {"provisionMs", "provisioned in "}} {
		if s := str(f.key); s != "" {
			if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 1000 {
				words = append(words, f.text+short(time.Duration(ms)*time.Millisecond))
			}
		}
	}
	if reason != "" {
		words = append(words, "reason: "+reason)
	}
	if errText != "" {
		words = append(words, errText)
	}
	if s := str("output"); s != "" {
		words = append(words, "· output: "+s)
	}
	delete(obj, "request_id") // long, and says nothing to a person watching
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		// Nothing nested, and nothing that may be a token, is shown: a
		// record in an event carries its holder's token.
		raw := strings.TrimSpace(string(obj[k]))
		switch {
		case strings.Contains(strings.ToLower(k), "token"):
		case strings.HasPrefix(raw, "{") || strings.HasPrefix(raw, "["):
			delete(obj, k)
			words = append(words, k+"=…")
		default:
			words = append(words, fmt.Sprintf("%s=%s", k, str(k)))
		}
	}
	ev.Text = clean(strings.Join(words, " "))
	ev.Tone = toneOf(ev.Name, errText != "")
	return ev
}

func toneOf(name string, failed bool) tone {
	switch {
	case failed, strings.Contains(name, "fail"), strings.Contains(name, "lost"), strings.Contains(name, "abandon"),
		strings.Contains(name, "quarantine") && !strings.Contains(name, "unquarantine"):
		return bad
	case strings.Contains(name, "takeover"), strings.Contains(name, "reap"), strings.Contains(name, "dropped"),
		strings.Contains(name, "recovered"):
		return warn
	case name == "granted", strings.Contains(name, "unquarantine"), strings.Contains(name, "restored"):
		return good
	}
	return plain
}
