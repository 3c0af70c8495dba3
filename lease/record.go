package lease

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/jsonfast"
)

// RecordVersion is the value of the "v" field this package writes and the
// only one it trusts; a record of any other version reads as unknown.
const RecordVersion = 1

// timeLayout is ISO-8601 UTC with milliseconds, the form JavaScript's
// Date.toISOString writes, so records are byte-compatible across
// implementations sharing one store.
const timeLayout = "2006-01-02T15:04:05.000Z"

// FormatTime renders t the way records store timestamps.
func FormatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// ParseTime reads a record timestamp as JavaScript's Date.parse reads the
// ISO forms: any RFC 3339 time (lower-case t and z, or a space for the T,
// included), a date-time without an offset (local time), or a date alone
// (UTC midnight).
func ParseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	u := strings.ToUpper(s)
	if len(u) > 10 && u[10] == ' ' {
		u = u[:10] + "T" + u[11:]
	}
	if t, err := time.Parse(time.RFC3339Nano, u); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02T15:04:05.999999999", u, time.Local); err == nil {
		return t, nil
	}
	return time.Parse("2006-01-02", u)
}

// Record is one lease as stored in <kind>.json.
//
// A record that cannot be trusted (not JSON, not an object, another version,
// missing or mistyped fields) is still returned by reads, with Corrupt set,
// Raw holding the file's text and Reason saying what is wrong; such a record
// is never live.
type Record struct {
	V          int
	Kind       string
	Owner      string
	Token      string
	Heartbeat  time.Time
	TTLMinutes float64
	// Payload is the caller's JSON value, or nil for JSON null.
	Payload    json.RawMessage
	AcquiredAt time.Time
	// Boot is the boot-clock reading taken with the heartbeat, when the
	// writer had one (an additive field, "boot" on disk; see [Record.Judge]).
	Boot *BootStamp
	// Fence is the number this incarnation of the lease got at acquire
	// (see dirstore/fence.go): it only grows per kind. 0 when the record has none
	// (written by another tool). It is kept beside the record, not in its
	// file, and not in its JSON either, which stays the file's field for
	// field: outputs print it beside the record, as "fence".
	Fence int64
	// Seen is the backend's judgement of the record when it read or
	// stored it: live or not, and until when, on the backend's clock.
	Seen Liveness

	// WriterUID, when not nil, is the user who wrote the record as the
	// backend knows it (the owner of its file on the directory store).
	WriterUID *uint32

	// Extra keeps fields written by other implementations, so a heartbeat
	// rewrites them unchanged.
	Extra map[string]json.RawMessage

	// deep names the top-level values (payload or extra fields) that nest
	// deeper than encoding/json parses: read without it, kept verbatim on
	// disk, left out of outputs (see decodeDeep).
	deep map[string]bool

	Corrupt bool
	Raw     string
	Reason  string
}

// TTL returns the record's time to live as a duration, at most about 292
// years (a record written by hand may hold any positive TTL).
func (r *Record) TTL() time.Duration {
	if d := r.TTLMinutes * float64(time.Minute); d < math.MaxInt64 {
		return time.Duration(d)
	}
	return math.MaxInt64
}

// ExpiresAt is the instant after which the record is expired: the
// backend's judgement ([Record.Seen]) when the record came from one, else
// its heartbeat plus its TTL. It is the zero time for a corrupt record.
func (r *Record) ExpiresAt() time.Time {
	if r.Corrupt {
		return time.Time{}
	}
	if !r.Seen.ExpiresAt.IsZero() {
		return r.Seen.ExpiresAt // the backend's judgement, on its clock
	}
	return r.Heartbeat.Add(r.TTL())
}

// Expired reports whether the record is dead at the wall-clock instant now
// by the rules of [Record.Judge] without a boot-clock reading: corrupt, its
// last heartbeat more than its TTL ago (in whole milliseconds, as the
// timestamps are stored), or its heartbeat implausibly far in the future.
// A [Store] judges with its boot clock too; see [Store.Judge].
func (r *Record) Expired(now time.Time) bool {
	return !r.Judge(now, nil).Live
}

// Redacted is a copy of r whose token is replaced by its fingerprint, for
// output to anyone but the process that acquired the lease.
func (r *Record) Redacted() *Record {
	if r == nil || r.Corrupt {
		return r
	}
	c := *r
	c.Token = TokenFingerprint(r.Token)
	return &c
}

var knownFields = []string{"v", "kind", "owner", "token", "heartbeat", "ttlMinutes", "payload", "acquiredAt"}

// MarshalJSON writes the known fields in their canonical order, then any
// extra fields sorted by name. A corrupt record renders as
// {"corrupt":true,"kind":…,"reason":…,"raw":…}.
func (r *Record) MarshalJSON() ([]byte, error) {
	return r.marshal(nil)
}

// marshal renders the record. A value in r.deep cannot go through
// encoding/json: with subst nil (outputs) it is left out, the payload shown
// as null and the names listed under "omitted"; otherwise (the file) it is
// written as a unique placeholder string recorded in subst, for EncodeFile
// to put the original text back.
func (r *Record) marshal(subst map[string]json.RawMessage) ([]byte, error) {
	if r.Corrupt {
		return json.Marshal(struct {
			Corrupt bool   `json:"corrupt"`
			Kind    string `json:"kind"`
			Reason  string `json:"reason"`
			Raw     string `json:"raw"`
		}{true, r.Kind, r.Reason, r.Raw})
	}
	payload := r.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	var omitted []string
	deepValue := func(name string, v json.RawMessage) (json.RawMessage, bool) {
		if !r.deep[name] {
			return v, true
		}
		if subst == nil {
			omitted = append(omitted, name)
			return nil, false
		}
		ph := `"\u0000deep-` + RandomHex(16) + `"`
		subst[ph] = v
		return json.RawMessage(ph), true
	}
	if v, ok := deepValue("payload", payload); ok {
		payload = v
	} else {
		payload = json.RawMessage("null")
	}
	b := make([]byte, 0, 512)
	b = append(b, '{')
	field := func(name string, v any) error {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = jsonfast.AppendString(b, name, false)
		b = append(b, ':')
		// The strings, integers and boot stamp of every record are written
		// here as marshalPlain writes them; the rest (the TTL, payloads,
		// other tools' fields) by it.
		switch x := v.(type) {
		case int:
			b = strconv.AppendInt(b, int64(x), 10)
			return nil
		case string:
			b = jsonfast.AppendString(b, x, false)
			return nil
		case json.RawMessage:
			if string(x) == "null" {
				b = append(b, "null"...)
				return nil
			}
		case bootField:
			b = append(b, `{"id":`...)
			b = jsonfast.AppendString(b, x.ID, false)
			b = append(b, `,"ms":`...)
			b = strconv.AppendInt(b, x.Ms, 10)
			b = append(b, `,"at":`...)
			b = jsonfast.AppendString(b, x.At, false)
			b = append(b, '}')
			return nil
		}
		enc, err := marshalPlain(v)
		if err != nil {
			return fmt.Errorf("field %s: %w", name, err)
		}
		b = append(b, enc...)
		return nil
	}
	known := []struct {
		name string
		v    any
	}{
		{"v", r.V}, {"kind", r.Kind}, {"owner", r.Owner}, {"token", r.Token},
		{"heartbeat", FormatTime(r.Heartbeat)}, {"ttlMinutes", r.TTLMinutes},
		{"payload", payload}, {"acquiredAt", FormatTime(r.AcquiredAt)},
	}
	for _, f := range known {
		if err := field(f.name, f.v); err != nil {
			return nil, err
		}
	}
	if r.Boot != nil {
		if err := field("boot", bootField{ID: r.Boot.ID, Ms: r.Boot.Ms, At: FormatTime(r.Heartbeat)}); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(r.Extra))
	for k := range r.Extra {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v, ok := deepValue(k, r.Extra[k])
		if !ok {
			continue
		}
		if err := field(k, v); err != nil {
			return nil, err
		}
	}
	if len(omitted) > 0 {
		if err := field("omitted", omitted); err != nil {
			return nil, err
		}
	}
	b = append(b, '}')
	return b, nil
}

// marshalPlain encodes v as compact JSON without escaping <, > and &, as
// JavaScript's JSON.stringify writes them.
func marshalPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// EncodeFile renders the record as stored on disk: two-space indented JSON
// and a final newline, the layout the reference implementation writes.
func (r *Record) EncodeFile() ([]byte, error) {
	subst := map[string]json.RawMessage{}
	compact, err := r.marshal(subst)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(2 * len(compact))
	if err := json.Indent(&b, compact, "", "  "); err != nil {
		return nil, err
	}
	out := append(b.Bytes(), '\n')
	for ph, v := range subst {
		out = bytes.Replace(out, []byte(ph), v, 1)
	}
	return out, nil
}

// DecodeRecord parses the bytes of <kind>.json. It never fails: a record
// that cannot be trusted comes back corrupt (and so reads as unknown). The
// rules follow the Node tool's wherever they can, so that the two never
// disagree about whether a lease is held: a record is corrupt when it is
// not a JSON object, when its "v" is not 1, when its heartbeat is not a
// time, or when its ttlMinutes is not a positive number. A missing or
// mistyped owner or token reads as empty (such a lease cannot be
// heartbeated or released, and lapses at its TTL, as in the Node tool), and
// the kind is always the file's.
func DecodeRecord(kind string, data []byte) *Record {
	bad := func(reason string) *Record {
		return &Record{Kind: kind, Corrupt: true, Raw: string(data), Reason: reason}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return bad("empty record")
	}
	var fields map[string]json.RawMessage
	var deep map[string]bool
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		var ok bool
		if fields, deep, ok = decodeDeep(data); !ok {
			return bad("not a JSON object")
		}
	}
	r := &Record{V: RecordVersion, Kind: kind}
	var v float64
	if err := strictField(fields, "v", &v); err != nil {
		return bad(err.Error())
	}
	if v != RecordVersion {
		return bad(fmt.Sprintf("unsupported record version %v", v))
	}
	_ = json.Unmarshal(fields["owner"], &r.Owner)
	_ = json.Unmarshal(fields["token"], &r.Token)
	var hb, acq string
	if err := strictField(fields, "heartbeat", &hb); err != nil {
		return bad(err.Error())
	}
	t, err := ParseTime(hb)
	if err != nil {
		return bad("heartbeat is not an ISO-8601 time")
	}
	r.Heartbeat = t
	if err := strictField(fields, "ttlMinutes", &r.TTLMinutes); err != nil {
		return bad(err.Error())
	}
	if !(r.TTLMinutes > 0) || math.IsInf(r.TTLMinutes, 0) {
		return bad("ttlMinutes is not a positive number")
	}
	if raw, ok := fields["payload"]; ok && string(raw) != "null" {
		r.Payload = raw
	}
	if strictField(fields, "acquiredAt", &acq) == nil {
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
		if b, ours := decodeBoot(raw, hb); ours {
			r.Boot = b
			delete(fields, "boot")
		}
	}
	if len(fields) > 0 {
		r.Extra = fields
	}
	r.deep = deep
	return r
}

// decodeDeep splits a JSON object into its top-level fields when
// encoding/json refused it, which for valid JSON means it nests deeper than
// that parser's limit (10 000). The Node tool parses such a record, so it
// must be judged here as there: the walk below checks the whole text is one
// valid JSON object (json.Decoder's Token keeps its own stack, with no
// depth limit) and returns each top-level value's text, naming the ones
// encoding/json cannot take. Records are bounded in size (1 MiB), which
// bounds the walk.
func decodeDeep(data []byte) (map[string]json.RawMessage, map[string]bool, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, false
	}
	fields, deep := map[string]json.RawMessage{}, map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok {
			return nil, nil, false
		}
		start := dec.InputOffset()
		depth := 0
		for {
			t, err := dec.Token()
			if err != nil {
				return nil, nil, false
			}
			switch t {
			case json.Delim('{'), json.Delim('['):
				depth++
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
			if depth == 0 {
				break
			}
		}
		raw := bytes.TrimLeft(data[start:dec.InputOffset()], " \t\r\n:")
		raw = bytes.TrimSpace(raw)
		fields[key] = json.RawMessage(raw)
		if !json.Valid(raw) {
			deep[key] = true
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, false // trailing text: JSON.parse refuses it too
	}
	return fields, deep, true
}

func strictField(fields map[string]json.RawMessage, name string, dst any) error {
	raw, ok := fields[name]
	if !ok {
		return fmt.Errorf("missing field %q", name)
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("field %q has the wrong type", name)
	}
	return nil
}
