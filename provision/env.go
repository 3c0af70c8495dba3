package provision

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Action names the operation a command performs on a slot. It is exported to
// the command as POOL_ACTION.
type Action string

// The actions a pool file can define a command for.
const (
	// ActionProvision prepares a slot before its first lease.
	ActionProvision Action = "provision"
	// ActionReset returns a slot to a clean state between leases.
	ActionReset Action = "reset"
	// ActionHealth checks that a slot is usable.
	ActionHealth Action = "health"
)

// Environment variable names that [SlotEnv] always sets.
const (
	envAction     = "POOL_ACTION"
	envSlotPrefix = "POOL_SLOT_"
	envSlotID     = envSlotPrefix + "ID"
	envSlotKind   = envSlotPrefix + "KIND"
)

// Slot is what a command is told about the slot it acts on.
type Slot struct {
	// ID is the slot id as a string; numeric ids are formatted by the caller.
	ID string
	// Kind is the slot's lease kind.
	Kind string
	// Attributes holds the slot's other attributes from the pool file, as
	// decoded JSON: map[string]any, []any, float64 or json.Number, string,
	// bool and nil. It does not include "id" or "kind".
	Attributes map[string]any
}

// SlotEnv returns the environment that describes slot to a command performing
// action, as "NAME=value" strings sorted by name.
//
// It sets POOL_SLOT_ID, POOL_SLOT_KIND and POOL_ACTION, plus one
// POOL_SLOT_<KEY> variable for every attribute. KEY is the attribute name in
// upper case with every character other than an ASCII letter or digit
// replaced by "_". Nested objects are flattened with "_" between the levels,
// so {"ports":{"api":3000}} gives POOL_SLOT_PORTS_API=3000; an empty object
// gives no variable. Values are formatted as follows: strings as they are,
// numbers and booleans as JSON writes them (3000, 1.5, true), null as the
// empty string, and arrays (or any other value) as compact JSON.
//
// When several attributes map to the same name, POOL_SLOT_ID and
// POOL_SLOT_KIND keep the slot's id and kind, and otherwise the attribute
// whose key path sorts first wins, so the result is always deterministic.
func SlotEnv(slot Slot, action Action) []string {
	vars := map[string]string{
		envSlotID:   slot.ID,
		envSlotKind: slot.Kind,
		envAction:   string(action),
	}
	flattenAttrs(vars, envSlotPrefix, slot.Attributes)

	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	slices.Sort(names)
	env := make([]string, len(names))
	for i, name := range names {
		env[i] = name + "=" + vars[name]
	}
	return env
}

// flattenAttrs adds a variable to vars for every leaf of attrs, naming it
// prefix followed by the path of keys joined by "_". Keys are visited in
// sorted order and an existing name is never overwritten.
func flattenAttrs(vars map[string]string, prefix string, attrs map[string]any) {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		name := prefix + envKey(k)
		if nested, ok := attrs[k].(map[string]any); ok {
			flattenAttrs(vars, name+"_", nested)
			continue
		}
		if _, taken := vars[name]; !taken {
			vars[name] = envValue(attrs[k])
		}
	}
}

// envKey upper-cases key and replaces every character that is not an ASCII
// letter or digit with "_".
func envKey(key string) string {
	var b strings.Builder
	b.Grow(len(key))
	for _, r := range key {
		switch {
		case r >= 'a' && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// envValue formats a decoded JSON value for the environment.
func envValue(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case json.Number:
		return v.String()
	}
	return compactJSON(v)
}

// compactJSON encodes v as compact JSON without escaping HTML characters,
// falling back to fmt formatting for values JSON cannot represent, such as
// NaN.
func compactJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}
