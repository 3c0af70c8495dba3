package pool

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// placeholderByte reports whether c may appear in a placeholder's path.
func placeholderByte(c byte) bool {
	return c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// refLookup is lookup written again: the dotted path through nested
// objects of the slot's attributes, id and kind.
func refLookup(s *Slot, path string) (any, bool) {
	scope := map[string]any{}
	for k, v := range s.Attributes {
		scope[k] = v
	}
	scope["id"], scope["kind"] = s.RawID, s.Kind
	var cur any = scope
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

// refRender is render written again without regular expressions: a
// placeholder is '{', one or more path bytes, '}'; the leftmost one wins
// and the text after it is scanned afresh (a value is never re-expanded).
// It returns the first path that names nothing.
func refRender(s *Slot, tmpl string) (out any, missing string, ok bool) {
	if len(tmpl) > 2 && tmpl[0] == '{' && tmpl[len(tmpl)-1] == '}' {
		path := tmpl[1 : len(tmpl)-1]
		whole := true
		for i := 0; i < len(path); i++ {
			whole = whole && placeholderByte(path[i])
		}
		if whole {
			v, found := refLookup(s, path)
			if !found {
				return nil, path, false
			}
			return v, "", true
		}
	}
	var b strings.Builder
	for i := 0; i < len(tmpl); {
		if tmpl[i] == '{' {
			j := i + 1
			for j < len(tmpl) && placeholderByte(tmpl[j]) {
				j++
			}
			if j > i+1 && j < len(tmpl) && tmpl[j] == '}' {
				path := tmpl[i+1 : j]
				v, found := refLookup(s, path)
				if !found {
					return nil, path, false
				}
				b.WriteString(valueText(v))
				i = j + 1
				continue
			}
		}
		b.WriteByte(tmpl[i])
		i++
	}
	return b.String(), "", true
}

// fuzzSlot is slot 7 with the attributes attrs decodes to (an object, else
// a fixed set) and the fuzzed value as attribute "v".
func fuzzSlot(attrs []byte, value string) *Slot {
	s := &Slot{ID: "7", RawID: json.Number("7"), Kind: "slot-7"}
	if err := decodeNumbers(attrs, &s.Attributes); err != nil || s.Attributes == nil {
		s.Attributes = map[string]any{
			"db": "acme_test_1", "ports": map[string]any{"api": json.Number("3000")},
			"none": nil, "on": true, "tags": []any{"a", json.Number("1.50")},
		}
	}
	s.Attributes["v"] = value
	return s
}

// FuzzGrantTemplate: a grantEnv or grantFields template, rendered for a
// slot whose attributes are arbitrary JSON and whose attribute "v" is any
// text, never panics; it renders exactly as an independent implementation
// of the documented rule does (a template without a placeholder is itself,
// "{path}" alone is the raw value, values are inserted verbatim and never
// expanded again), and a placeholder that names nothing is an ErrConfig
// naming the field and the placeholder. Through a whole pool file the same
// holds, and the env a grant carries is either exportable or refused
// before any grant is taken.
func FuzzGrantTemplate(f *testing.F) {
	f.Add("postgresql://u@localhost:5432/{db}", "x", []byte(`{"db":"acme"}`))
	f.Fuzz(func(t *testing.T, tmpl, value string, attrs []byte) {
		s := fuzzSlot(attrs, value)
		const where = "$.grantEnv.X"
		got, err := s.render(where, tmpl)
		want, missing, ok := refRender(s, tmpl)
		if !ok {
			if err == nil {
				t.Fatalf("render(%q) = %#v; placeholder {%s} names nothing", tmpl, got, missing)
			}
			msg := err.Error()
			if !errors.Is(err, ErrConfig) || !strings.Contains(msg, where) || !strings.Contains(msg, "{"+missing+"}") || !strings.Contains(msg, "slot 7") {
				t.Fatalf("render(%q) error %q: want ErrConfig naming %s, {%s} and slot 7", tmpl, msg, where, missing)
			}
		} else {
			if err != nil {
				t.Fatalf("render(%q): %v", tmpl, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("render(%q) = %#v, want %#v", tmpl, got, want)
			}
			if !strings.Contains(tmpl, "{") && got != tmpl {
				t.Fatalf("a template without an opening brace rendered to %#v", got)
			}
		}
		// valueText of a structured value is compact JSON of that value.
		for k, v := range s.Attributes {
			switch v.(type) {
			case map[string]any, []any:
				text := valueText(v)
				var back any
				if err := decodeNumbers([]byte(text), &back); err != nil || !reflect.DeepEqual(back, v) {
					t.Fatalf("valueText(%s) = %q does not decode back (%v)", k, text, err)
				}
			}
		}

		// The same through a pool file, where every template is checked
		// for every slot at load time.
		if !utf8.ValidString(tmpl) || !utf8.ValidString(value) || !json.Valid(attrs) {
			return // a pool file is JSON text: these cannot reach render from one
		}
		slot := map[string]any{}
		for k, v := range s.Attributes {
			if k != "id" && k != "kind" {
				slot[k] = v
			}
		}
		slot["id"] = json.Number("7")
		file, err := json.Marshal(map[string]any{
			"grantEnv":    map[string]string{"X": tmpl},
			"grantFields": map[string]any{"f": tmpl},
			"slots":       []any{slot},
		})
		if err != nil {
			t.Fatal(err)
		}
		c, perr := Parse(file, "/base")
		if perr != nil {
			if !errors.Is(perr, ErrConfig) || !strings.Contains(perr.Error(), "$.slots[0]") {
				t.Fatalf("Parse error %q: want ErrConfig naming the slot", perr)
			}
			if ok && !strings.Contains(perr.Error(), "NUL") {
				t.Fatalf("Parse refused a template that renders: %v", perr)
			}
			return
		}
		if !ok {
			t.Fatalf("Parse accepted a template with placeholder {%s}, which names nothing", missing)
		}
		env, fields, err := c.grantParts(c.Slots[0])
		if err != nil {
			t.Fatalf("grantParts after a successful Parse: %v", err)
		}
		want, _, _ = refRender(c.Slots[0], tmpl)
		if env["X"] != valueText(want) || !reflect.DeepEqual(fields["f"], want) {
			t.Fatalf("grant env X = %q, field f = %#v; want %#v", env["X"], fields["f"], want)
		}
		out, err := ShellExports(env, c.ShellPrefix, c.Slots[0].ID, "tok", "owner")
		if err != nil || !strings.HasPrefix(out, "export X="+ShellQuote(env["X"])+"\n") {
			t.Fatalf("ShellExports of a loaded pool's grant = %q, %v", out, err)
		}
		if _, err := json.Marshal(fields); err != nil {
			t.Fatalf("grant fields do not marshal: %v", err)
		}
		if bytes.ContainsRune([]byte(env["X"]), 0) {
			t.Fatal("a NUL byte reached the grant env")
		}
	})
}
