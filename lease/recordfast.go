package lease

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// decodeRecordFast is DecodeRecord for the records tools actually write:
// a valid JSON object whose known fields have their plain types (v and
// ttlMinutes numbers, owner, token, heartbeat and acquiredAt strings
// without escapes) and whose keys are plain ASCII. For those it returns
// exactly what the encoding/json path returns, without encoding/json's
// reflection, which a short-lived process pays on first use (see
// docs/FAST-PATHS.md); for anything else (including every corrupt or
// unusual record) ok is false and the caller takes that path. The tests
// (recordfast_test.go) compare the two on many inputs and by fuzzing.
func decodeRecordFast(kind string, data []byte) (r *Record, ok bool) {
	data = bytes.Clone(data) // the values below are slices of it
	fields, ok := splitObject(data)
	if !ok {
		return nil, false
	}
	num := func(name string) (float64, bool) {
		raw, ok := fields[name]
		if !ok || len(raw) == 0 || !(raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
			return 0, false
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		return f, err == nil
	}
	str := func(name string) (string, bool) {
		raw, ok := fields[name]
		if !ok {
			return "", false
		}
		return plainString(raw)
	}
	v, ok := num("v")
	if !ok || v != RecordVersion {
		return nil, false
	}
	r = &Record{V: RecordVersion, Kind: kind}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"owner", &r.Owner}, {"token", &r.Token}} {
		if _, there := fields[f.name]; !there {
			continue // reads as empty, as json.Unmarshal of nothing leaves it
		}
		if *f.dst, ok = str(f.name); !ok {
			return nil, false
		}
	}
	hb, ok := str("heartbeat")
	if !ok {
		return nil, false
	}
	t, err := ParseTime(hb)
	if err != nil {
		return nil, false
	}
	r.Heartbeat = t
	if r.TTLMinutes, ok = num("ttlMinutes"); !ok || !(r.TTLMinutes > 0) || math.IsInf(r.TTLMinutes, 0) {
		return nil, false
	}
	if raw, ok := fields["payload"]; ok && string(raw) != "null" {
		r.Payload = raw
	}
	if _, there := fields["acquiredAt"]; there {
		acq, ok := str("acquiredAt")
		if !ok {
			return nil, false
		}
		if t, err := ParseTime(acq); err == nil {
			r.AcquiredAt = t
		}
	}
	if r.AcquiredAt.IsZero() {
		r.AcquiredAt = r.Heartbeat
	}
	for _, k := range knownFields {
		delete(fields, k)
	}
	if raw, ok := fields["boot"]; ok {
		b, ours, sure := decodeBootFast(raw, hb)
		if !sure {
			return nil, false
		}
		if ours {
			r.Boot = b
			delete(fields, "boot")
		}
	}
	if len(fields) > 0 {
		r.Extra = fields
	}
	return r, true
}

// decodeBootFast is decodeBoot for a stamp of exactly the fields id, ms
// and at, each once, with plain values; sure is false for anything else.
func decodeBootFast(raw json.RawMessage, heartbeat string) (stamp *BootStamp, ours, sure bool) {
	// Members other than id, ms and at (encoding/json matches those
	// names whatever their case) are refused there, and here left to it;
	// a repeated one keeps its last value in both.
	fields, ok := splitObject(raw)
	if !ok || len(fields) != 3 {
		return nil, false, false
	}
	id, ok1 := plainString(fields["id"])
	at, ok2 := plainString(fields["at"])
	msRaw := fields["ms"]
	if !ok1 || !ok2 || !isInteger(msRaw) {
		return nil, false, false
	}
	ms, err := strconv.ParseInt(string(msRaw), 10, 64)
	if err != nil {
		return nil, false, false
	}
	if id == "" || ms < 0 || at == "" {
		return nil, false, true
	}
	if at != heartbeat {
		return nil, true, true
	}
	return &BootStamp{ID: id, Ms: ms}, true, true
}

func isInteger(raw []byte) bool {
	if len(raw) > 0 && raw[0] == '-' {
		raw = raw[1:]
	}
	if len(raw) == 0 {
		return false
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// plainString is the value of a JSON string literal without escapes,
// valid UTF-8 (so decoding it changes nothing); ok is false for any other
// value.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	s := raw[1 : len(raw)-1]
	if bytes.IndexByte(s, '\\') >= 0 || bytes.IndexByte(s, '"') >= 0 || !utf8.Valid(s) {
		return "", false
	}
	return string(s), true
}

// splitObject splits a JSON object into its members' raw values, as
// json.Unmarshal into a map[string]json.RawMessage does (a repeated key
// keeps its last value), checking that data is one valid JSON value with
// nothing but whitespace around it. ok is false for invalid JSON, for
// anything but an object, for keys that are not plain printable ASCII and
// for values nested deeper than maxFastDepth.
func splitObject(data []byte) (map[string]json.RawMessage, bool) {
	p := jsonScan{b: data}
	p.space()
	if !p.byte('{') {
		return nil, false
	}
	fields := map[string]json.RawMessage{}
	p.space()
	if !p.byte('}') {
		for {
			p.space()
			start := p.i
			if !p.str() {
				return nil, false
			}
			key := data[start+1 : p.i-1]
			for _, c := range key {
				if c < 0x20 || c > 0x7e || c == '\\' {
					return nil, false
				}
			}
			p.space()
			if !p.byte(':') {
				return nil, false
			}
			p.space()
			vstart := p.i
			if !p.value(1) {
				return nil, false
			}
			fields[string(key)] = json.RawMessage(data[vstart:p.i:p.i])
			p.space()
			if p.byte(',') {
				continue
			}
			if p.byte('}') {
				break
			}
			return nil, false
		}
	}
	p.space()
	return fields, p.i == len(p.b)
}

// maxFastDepth bounds the nesting splitObject follows; deeper values go
// to encoding/json (and its deep-record handling).
const maxFastDepth = 100

// jsonScan validates JSON text as encoding/json's scanner does.
type jsonScan struct {
	b []byte
	i int
}

func (p *jsonScan) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonScan) byte(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *jsonScan) literal(s string) bool {
	if bytes.HasPrefix(p.b[p.i:], []byte(s)) {
		p.i += len(s)
		return true
	}
	return false
}

func (p *jsonScan) value(depth int) bool {
	if p.i >= len(p.b) || depth > maxFastDepth {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		return p.str()
	case c == '{':
		p.i++
		p.space()
		if p.byte('}') {
			return true
		}
		for {
			p.space()
			if !p.str() {
				return false
			}
			p.space()
			if !p.byte(':') {
				return false
			}
			p.space()
			if !p.value(depth + 1) {
				return false
			}
			p.space()
			if p.byte(',') {
				continue
			}
			return p.byte('}')
		}
	case c == '[':
		p.i++
		p.space()
		if p.byte(']') {
			return true
		}
		for {
			p.space()
			if !p.value(depth + 1) {
				return false
			}
			p.space()
			if p.byte(',') {
				continue
			}
			return p.byte(']')
		}
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return false
}

func (p *jsonScan) digits() int {
	n := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}

func (p *jsonScan) number() bool {
	p.byte('-')
	if p.byte('0') {
		// a leading zero stands alone
	} else if p.digits() == 0 {
		return false
	}
	if p.byte('.') && p.digits() == 0 {
		return false
	}
	if p.byte('e') || p.byte('E') {
		if !p.byte('+') {
			p.byte('-')
		}
		if p.digits() == 0 {
			return false
		}
	}
	return true
}

func (p *jsonScan) str() bool {
	if !p.byte('"') {
		return false
	}
	for p.i < len(p.b) {
		c := p.b[p.i]
		p.i++
		switch {
		case c == '"':
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if p.i >= len(p.b) {
				return false
			}
			e := p.b[p.i]
			p.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if p.i+4 > len(p.b) {
					return false
				}
				for _, h := range p.b[p.i : p.i+4] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false
					}
				}
				p.i += 4
			default:
				return false
			}
		}
	}
	return false
}
