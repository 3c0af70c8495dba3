package pool

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/durable-lease/durable-lease/internal/cli/jsonpos"
	"github.com/durable-lease/durable-lease/internal/cli/suggest"
	"github.com/durable-lease/durable-lease/internal/sys/storefile"
	"github.com/durable-lease/durable-lease/lease"
)

// Defaults of the pool file's optional fields.
const (
	// DefaultTTLMinutes is a slot lease's TTL: long enough for a heartbeat
	// loop that beats every few minutes to survive a slow machine.
	DefaultTTLMinutes = 30
	// DefaultQuarantineAfter is quarantineAfter's default: three failures
	// of a slot in a row take it out of rotation.
	DefaultQuarantineAfter = 3
	// MaxQuarantineAfter bounds quarantineAfter.
	MaxQuarantineAfter = 1000
	// MinProbe is the shortest probeMs accepted.
	MinProbe = time.Second
	// MinWaiterStale is the shortest waiterStaleMs accepted: waiters poll
	// every third of it, and more often would only churn the queue.
	MinWaiterStale = 100 * time.Millisecond
	// DefaultWaiterStale drops a queue entry whose waiter has not polled for
	// this long; waiters poll at least every third of it.
	DefaultWaiterStale = 90 * time.Second
	// DefaultMovingAvgSeed is the assumed hold time before any history
	// exists, used for ETAs.
	DefaultMovingAvgSeed = 8 * time.Minute
	DefaultName          = "pool"
	DefaultKindPrefix    = "slot-"
	DefaultNudgeEvent    = "lease-granted"
	DefaultShellPrefix   = "POOL_LEASE"
)

// maxDurationMs bounds the millisecond fields at 366 days, like a lease's
// TTL; far larger values would overflow a time.Duration.
const maxDurationMs = lease.MaxTTLMinutes * 60_000

// Config is a validated pool file.
type Config struct {
	// File is the pool file's absolute path ("" when built in code).
	File string
	// StoreField is the store the pool file names ("store", as written:
	// a directory, relative to the file's directory or under ~, or a
	// store URL), or "" for the default; --store and LEASE_STORE beat it.
	// [StoreFor] resolves it, only when it is used.
	StoreField    string
	storeBase     string
	Name          string
	KindPrefix    string
	QueueLockKind string
	NudgeEvent    string
	ShellPrefix   string
	Bookkeeper    string
	TTLMinutes    float64
	WaiterStale   time.Duration
	MovingAvgSeed time.Duration
	// QuarantineAfter is how many failed provisions or health checks of a
	// slot in a row take it out of rotation (quarantineAfter; 0: never).
	QuarantineAfter int
	// Probe is how often pump health-checks free slots (probeMs; 0: never).
	Probe time.Duration
	// Dir is the working directory of commands: the pool file's cwd
	// resolved against the file's directory.
	Dir          string
	Provision    string
	Reset        string
	Health       string
	NudgeCommand string
	// GrantEnv maps variable names to templates; nil means the POOL_SLOT_*
	// variables.
	GrantEnv map[string]string
	// GrantFields are extra top-level grant fields: templates (strings) or
	// literal JSON values.
	GrantFields map[string]any
	Slots       []*Slot
}

// Slot is one slot of a pool.
type Slot struct {
	// ID is the id as text; RawID is the id as written (a string or a
	// json.Number), which grants print unchanged.
	ID    string
	RawID any
	// Kind is the slot's lease kind: the pool's kindPrefix and the id, or
	// the slot's own "kind".
	Kind string
	// Attributes are the slot's fields other than id and kind.
	Attributes map[string]any
}

var (
	// Compiled at their first use, not at initialisation: pool-run's
	// baton runs and its guardian, which link this package, use none.
	envNamePattern    = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_]*$`)
	placeholderRegexp = lazyRegexp(`\{([A-Za-z0-9_.]+)\}`)
	wholePlaceholder  = lazyRegexp(`^\{([A-Za-z0-9_.]+)\}$`)
	// reservedGrantFields are the grant's own fields, which grantFields
	// may not shadow.
	reservedGrantFields = map[string]bool{
		"ok": true, "state": true, "requestId": true, "request_id": true, "mode": true,
		"slot": true, "slot_id": true, "kind": true, "owner": true, "token": true,
		"ttlMinutes": true, "attributes": true, "attrs": true, "env": true, "grantedAt": true,
	}
	knownPoolFields = []string{
		"name", "kindPrefix", "queueLockKind", "nudgeEvent", "shellPrefix", "bookkeeper",
		"ttlMinutes", "waiterStaleMs", "movingAvgSeedMs", "cwd", "provision", "reset",
		"health", "nudgeCommand", "grantEnv", "grantFields", "slots", "quarantineAfter", "probeMs", "store",
	}
)

// maxPoolFileBytes bounds a pool file: thousands of slots fit in it.
const maxPoolFileBytes = 4 << 20

// LoadFile reads and validates a pool file.
func LoadFile(path string) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	data, err := storefile.ReadUserFile(abs, maxPoolFileBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read %s: %v", ErrConfig, path, err)
	}
	c, err := Parse(data, filepath.Dir(abs))
	if ce := (*ConfigError)(nil); errors.As(err, &ce) {
		named := *ce
		named.File = path
		return nil, &named
	}
	if err != nil {
		return nil, fmt.Errorf("%w %s: %s", ErrConfig, path, strings.TrimPrefix(err.Error(), ErrConfig.Error()+": "))
	}
	c.File = abs
	return c, nil
}

// Parse validates the bytes of a pool file; relative paths resolve against
// baseDir. Errors are [*ConfigError]s: the JSON path of the problem, such
// as $.slots[1].id, and its line and column.
func Parse(data []byte, baseDir string) (*Config, error) {
	c, err := parse(data, baseDir)
	if ce := (*ConfigError)(nil); errors.As(err, &ce) && ce.Line == 0 {
		if pos, ok := jsonpos.Find(data, ce.Path); ok {
			ce.Line, ce.Column = pos.Line, pos.Column
		}
	}
	return c, err
}

func parse(data []byte, baseDir string) (*Config, error) {
	if m := jsonpos.Check(data); m != nil {
		return nil, &ConfigError{Path: m.Path, Line: m.Line, Column: m.Column, Msg: "not JSON: " + m.Msg}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		return nil, configErr("$", "must be a JSON object of pool fields (such as {\"slots\": [...]}), not %s", jsonKind(data))
	}
	if k := firstUnknown(data, top); k != "" {
		if like := suggest.Similar(k, knownPoolFields, true); len(like) > 0 {
			return nil, configErr("$."+k, "%s", suggest.Phrase("unknown field", like))
		}
		return nil, configErr("$."+k, "unknown field (known: %s)", strings.Join(knownPoolFields, ", "))
	}
	c := &Config{Name: DefaultName, KindPrefix: DefaultKindPrefix, NudgeEvent: DefaultNudgeEvent,
		ShellPrefix: DefaultShellPrefix, TTLMinutes: DefaultTTLMinutes,
		WaiterStale: DefaultWaiterStale, MovingAvgSeed: DefaultMovingAvgSeed, QuarantineAfter: DefaultQuarantineAfter}
	cwd := "."
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{"name", &c.Name}, {"kindPrefix", &c.KindPrefix}, {"queueLockKind", &c.QueueLockKind},
		{"nudgeEvent", &c.NudgeEvent}, {"shellPrefix", &c.ShellPrefix}, {"bookkeeper", &c.Bookkeeper},
		{"cwd", &cwd}, {"provision", &c.Provision}, {"reset", &c.Reset}, {"health", &c.Health},
		{"nudgeCommand", &c.NudgeCommand},
	} {
		if raw, ok := top[f.name]; ok {
			if err := json.Unmarshal(raw, f.dst); err != nil {
				return nil, configErr("$."+f.name, "must be a string")
			}
		}
	}
	if !lease.ValidKind(c.Name) {
		return nil, configErr("$.name", "%q must match %s (it names the pool's directory)", c.Name, lease.KindPattern)
	}
	if raw, ok := top["store"]; ok {
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, configErr("$.store", "must be a string: a directory or a store URL")
		}
		// Checked now, resolved when used: with HOME unset, a "~/…" store
		// is an error only if no flag or LEASE_STORE beats it.
		if _, err := ResolveStoreField(v, baseDir, "/"); err != nil {
			return nil, err
		}
		c.StoreField, c.storeBase = v, baseDir
	}
	if c.QueueLockKind == "" {
		c.QueueLockKind = c.Name + "-queue"
	}
	if !lease.ValidKind(c.QueueLockKind) {
		return nil, configErr("$.queueLockKind", "%q must match %s", c.QueueLockKind, lease.KindPattern)
	}
	if !envNamePattern().MatchString(c.ShellPrefix) {
		return nil, configErr("$.shellPrefix", "%q is not a valid environment variable name", c.ShellPrefix)
	}
	if filepath.IsAbs(cwd) {
		c.Dir = filepath.Clean(cwd)
	} else {
		c.Dir = filepath.Join(baseDir, cwd)
	}
	if c.Reset == "" {
		c.Reset = c.Provision
	}
	for _, f := range []struct {
		name string
		set  func(float64)
	}{
		{"ttlMinutes", func(v float64) { c.TTLMinutes = v }},
		{"waiterStaleMs", func(v float64) { c.WaiterStale = time.Duration(v * float64(time.Millisecond)) }},
		{"movingAvgSeedMs", func(v float64) { c.MovingAvgSeed = time.Duration(v * float64(time.Millisecond)) }},
	} {
		raw, ok := top[f.name]
		if !ok {
			continue
		}
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, configErr("$."+f.name, "must be a positive number")
		}
		if f.name != "ttlMinutes" && v > maxDurationMs {
			return nil, configErr("$."+f.name, "must be at most %d (366 days)", int64(maxDurationMs))
		}
		f.set(v)
	}
	if _, set := top["ttlMinutes"]; set && !lease.ValidTTL(c.TTLMinutes) {
		return nil, configErr("$.ttlMinutes", "must be %s", lease.TTLRange)
	}
	if raw, ok := top["quarantineAfter"]; ok {
		var n float64
		if err := json.Unmarshal(raw, &n); err != nil || n != math.Trunc(n) || n < 0 || n > MaxQuarantineAfter {
			return nil, configErr("$.quarantineAfter", "must be a whole number from 0 (never) to %d", MaxQuarantineAfter)
		}
		c.QuarantineAfter = int(n)
	}
	if raw, ok := top["probeMs"]; ok {
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil || math.IsNaN(v) || v != 0 && (v < float64(MinProbe.Milliseconds()) || v > maxDurationMs) {
			return nil, configErr("$.probeMs", "must be 0 (never) or from %d to %d", MinProbe.Milliseconds(), int64(maxDurationMs))
		}
		c.Probe = time.Duration(v * float64(time.Millisecond))
	}
	if _, set := top["waiterStaleMs"]; set && c.WaiterStale < MinWaiterStale {
		return nil, configErr("$.waiterStaleMs", "must be at least %d: a waiter re-checks every third of it", MinWaiterStale.Milliseconds())
	}
	if raw, ok := top["grantEnv"]; ok {
		if err := json.Unmarshal(raw, &c.GrantEnv); err != nil || c.GrantEnv == nil {
			return nil, configErr("$.grantEnv", "must be an object of template strings")
		}
		for k := range c.GrantEnv {
			if !envNamePattern().MatchString(k) {
				return nil, configErr("$.grantEnv."+k, "is not a valid environment variable name")
			}
		}
	}
	if raw, ok := top["grantFields"]; ok {
		if err := decodeNumbers(raw, &c.GrantFields); err != nil || c.GrantFields == nil {
			return nil, configErr("$.grantFields", "must be an object")
		}
		for k := range c.GrantFields {
			if reservedGrantFields[k] {
				return nil, configErr("$.grantFields."+k, "collides with a field every grant carries")
			}
		}
	}
	if err := c.parseSlots(top["slots"]); err != nil {
		return nil, err
	}
	// Fail when the file is loaded, not at the first grant: every template
	// must resolve for every slot.
	for i, s := range c.Slots {
		if _, _, err := c.grantParts(s); err != nil {
			if ce := (*ConfigError)(nil); errors.As(err, &ce) {
				ce.Msg += fmt.Sprintf(" (slot at $.slots[%d])", i)
			}
			return nil, err
		}
	}
	return c, nil
}

func (c *Config) parseSlots(raw json.RawMessage) error {
	var slots []json.RawMessage
	if raw == nil || json.Unmarshal(raw, &slots) != nil || len(slots) == 0 {
		return configErr("$.slots", "must be a non-empty array of slot objects")
	}
	ids := map[string]int{}
	kinds := map[string]int{c.QueueLockKind: -1}
	for i, rawSlot := range slots {
		path := fmt.Sprintf("$.slots[%d]", i)
		var fields map[string]any
		if err := decodeNumbers(rawSlot, &fields); err != nil || fields == nil {
			return configErr(path, "must be an object")
		}
		s := &Slot{Attributes: map[string]any{}}
		switch id := fields["id"].(type) {
		case string:
			s.ID, s.RawID = id, id
		case json.Number:
			s.ID, s.RawID = canonicalNumber(id), id
		default:
			return configErr(path+".id", "must be a string or a number")
		}
		if s.ID == "" {
			return configErr(path+".id", "must not be empty")
		}
		if j, dup := ids[s.ID]; dup {
			return configErr(path+".id", "duplicate slot id %q (also $.slots[%d])", s.ID, j)
		}
		ids[s.ID] = i
		s.Kind = c.KindPrefix + s.ID
		kindPath := path + ".id"
		if k, ok := fields["kind"]; ok {
			ks, isString := k.(string)
			if !isString {
				return configErr(path+".kind", "must be a string")
			}
			s.Kind, kindPath = ks, path+".kind"
		}
		if !lease.ValidKind(s.Kind) {
			return configErr(kindPath, "lease kind %q (kindPrefix + id, or kind) must match %s", s.Kind, lease.KindPattern)
		}
		if j, dup := kinds[s.Kind]; dup {
			if j < 0 {
				return configErr(path, "lease kind %q is the queue lock's kind", s.Kind)
			}
			return configErr(path, "lease kind %q is also the kind of $.slots[%d]", s.Kind, j)
		}
		kinds[s.Kind] = i
		for k, v := range fields {
			if k != "id" && k != "kind" {
				s.Attributes[k] = v
			}
		}
		c.Slots = append(c.Slots, s)
	}
	return nil
}

// canonicalNumber formats a JSON number the way JavaScript's String() would
// for the integers and decimals a slot id holds (1.0 → "1").
func canonicalNumber(n json.Number) string {
	if f, err := strconv.ParseFloat(string(n), 64); err == nil {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return string(n)
}

func decodeNumbers(raw json.RawMessage, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(dst)
}

// SlotByID finds a slot by its id; a numeric id matches however it is
// written ("01" finds slot 1).
func (c *Config) SlotByID(id string) (*Slot, error) {
	for _, s := range c.Slots {
		if s.ID == id {
			return s, nil
		}
	}
	if f, err := strconv.ParseFloat(id, 64); err == nil && !math.IsNaN(f) {
		for _, s := range c.Slots {
			if _, isNum := s.RawID.(json.Number); isNum && s.ID == strconv.FormatFloat(f, 'f', -1, 64) {
				return s, nil
			}
		}
	}
	ids := make([]string, len(c.Slots))
	for i, s := range c.Slots {
		ids[i] = s.ID
	}
	return nil, fmt.Errorf("%w: no slot %q in pool %s (slots: %s)", ErrInvalid, id, c.Name, strings.Join(ids, ", "))
}

// lookup reads a dotted path from a slot's attributes, id and kind.
func (s *Slot) lookup(path string) (any, bool) {
	var cur any = s.scope()
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func (s *Slot) scope() map[string]any {
	m := make(map[string]any, len(s.Attributes)+2)
	for k, v := range s.Attributes {
		m[k] = v
	}
	m["id"], m["kind"] = s.RawID, s.Kind
	return m
}

// render fills a template for slot. A template that is exactly "{path}"
// yields the raw value (numbers and objects survive); otherwise each
// placeholder is replaced by its text.
func (s *Slot) render(where, tmpl string) (any, error) {
	if m := wholePlaceholder().FindStringSubmatch(tmpl); m != nil {
		v, ok := s.lookup(m[1])
		if !ok {
			return nil, configErr(where, "placeholder {%s} names no attribute of slot %s", m[1], s.ID)
		}
		return v, nil
	}
	var err error
	out := placeholderRegexp().ReplaceAllStringFunc(tmpl, func(ph string) string {
		path := ph[1 : len(ph)-1]
		v, ok := s.lookup(path)
		if !ok {
			if err == nil {
				err = configErr(where, "placeholder {%s} names no attribute of slot %s", path, s.ID)
			}
			return ""
		}
		return valueText(v)
	})
	return out, err
}

// valueText renders an attribute value as text: strings as they are,
// numbers as written, objects and arrays as compact JSON.
func valueText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(x)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as JSON.stringify and POOL_SLOT_* write it
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

// WorkEnv is the environment pool-run gives the work it runs on slot s:
// the slot's POOL_SLOT_* variables (as its provision, reset and health
// commands see them, without POOL_ACTION), with the grant's env on top,
// which wins on a name both define. Without grantEnv the two are the
// same.
func (c *Config) WorkEnv(s *Slot) (map[string]string, error) {
	grant, _, err := c.grantParts(s)
	if err != nil {
		return nil, err
	}
	env := make(map[string]string, len(grant)+len(s.Attributes)+2)
	for _, kv := range slotEnvNoAction(s) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for k, v := range grant {
		env[k] = v
	}
	return env, nil
}

// grantParts computes the env and extra fields a grant of slot carries.
func (c *Config) grantParts(s *Slot) (map[string]string, map[string]any, error) {
	env := map[string]string{}
	if c.GrantEnv == nil {
		for _, kv := range slotEnvNoAction(s) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	} else {
		for _, k := range sortedKeys(c.GrantEnv) {
			v, err := s.render("$.grantEnv."+k, c.GrantEnv[k])
			if err != nil {
				return nil, nil, err
			}
			env[k] = valueText(v)
		}
	}
	for k, v := range env {
		if strings.ContainsRune(v, 0) {
			// An environment variable cannot hold a NUL byte; refuse it
			// here, before a grant is taken that could not be handed out.
			return nil, nil, configErr("$.grantEnv", "%s of slot %s would hold a NUL byte", k, s.ID)
		}
	}
	fields := map[string]any{}
	for _, k := range sortedKeys(c.GrantFields) {
		tmpl, isTemplate := c.GrantFields[k].(string)
		if !isTemplate {
			fields[k] = c.GrantFields[k]
			continue
		}
		v, err := s.render("$.grantFields."+k, tmpl)
		if err != nil {
			return nil, nil, err
		}
		fields[k] = v
	}
	return env, fields, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// firstUnknown is the field of top that is no pool field and comes first
// in data, or "".
func firstUnknown(data []byte, top map[string]json.RawMessage) string {
	first, at := "", jsonpos.Position{}
	for _, k := range sortedKeys(top) {
		if contains(knownPoolFields, k) {
			continue
		}
		pos, _ := jsonpos.Find(data, "$."+k)
		if first == "" || pos.Line < at.Line || pos.Line == at.Line && pos.Column < at.Column {
			first, at = k, pos
		}
	}
	return first
}

// jsonKind names the kind of the JSON value data holds, for a message.
func jsonKind(data []byte) string {
	switch t := bytes.TrimLeft(data, " \t\r\n"); {
	case len(t) == 0:
		return "nothing"
	case t[0] == '[':
		return "an array"
	case t[0] == '"':
		return "a string"
	case t[0] == 'n':
		return "null"
	case t[0] == 't', t[0] == 'f':
		return "a boolean"
	}
	return "a number"
}

// Kinds are the leases the pool's commands take: its queue lock and each
// slot's.
func (c *Config) Kinds() []string {
	kinds := []string{c.QueueLockKind}
	for _, s := range c.Slots {
		kinds = append(kinds, s.Kind)
	}
	return kinds
}

// Identity names a pool on a host for dirpool.ClaimHostStore: its name and its
// slots (ids, kinds and attributes, the ports and databases they hand
// out). Two pool files that say the same give the same identity.
func (c *Config) Identity() string {
	type slot struct {
		ID    string         `json:"id"`
		Kind  string         `json:"kind"`
		Attrs map[string]any `json:"attrs"`
	}
	v := struct {
		Name  string `json:"name"`
		Slots []slot `json:"slots"`
	}{Name: c.Name}
	for _, s := range c.Slots {
		v.Slots = append(v.Slots, slot{s.ID, s.Kind, s.Attributes})
	}
	data, _ := json.Marshal(v) // maps are written with sorted keys
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

// lazyRegexp is a regular expression compiled once, when first asked for.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
