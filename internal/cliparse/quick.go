package cliparse

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Command is the verb a command line selected.
type Command struct {
	// Name is the verb as typed ("acquire", "try-grant"); empty for a
	// grammar without verbs.
	Name string
	// Target points to the verb's struct inside the grammar (nil without
	// verbs): the value whose Run method does the work.
	Target any
}

// quick parses the plain command lines nearly every call uses without
// building kong's model of the whole grammar, which only help and error
// messages need (see docs/PERFORMANCE.md). It accepts only what it can
// read exactly as kong would: long flags of the selected verb and of the
// root, as --name value or --name=value, each at most once; string, bool,
// int64, float64 and time.Duration flags and pointers to them; env
// defaults; required flags; and, for a grammar without verbs, a trailing
// passthrough command. Anything else (help, short flags, a flag given
// twice, a value that does not convert, a tag or a hook it does not know)
// makes it decline, and the caller hands the command line to kong, whose
// answer, error or help is then the only one.
//
// On success the grammar's root flags and the selected verb are filled;
// the other verbs' fields stay zero, where kong would also give them their
// env defaults. Nothing reads those: a verb sees its own struct and the
// root.
func quick(grammar any, args []string) (Command, bool) {
	rv := reflect.ValueOf(grammar)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return Command{}, false
	}
	var root node
	if !root.read(rv.Elem().Type(), nil) {
		return Command{}, false
	}
	out := reflect.New(rv.Elem().Type()).Elem()
	active := root.flags
	var verb *verbField
	given := make([]bool, len(active)) // per active flag, in order
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !utf8.ValidString(a) {
			return Command{}, false // kong would turn it into U+FFFD
		}
		switch {
		case a == "--" || !strings.HasPrefix(a, "-") && root.arg != nil:
			// The passthrough command: kong keeps the "--" in it.
			if root.arg == nil || len(root.verbs) > 0 {
				return Command{}, false
			}
			for _, rest := range args[i:] {
				if !utf8.ValidString(rest) {
					return Command{}, false
				}
			}
			out.FieldByIndex(root.arg.index).Set(reflect.ValueOf(append([]string(nil), args[i:]...)))
			i = len(args)
		case strings.HasPrefix(a, "--"):
			name, value, inline := strings.Cut(a[2:], "=")
			k := flagIndex(active, name)
			if k < 0 || given[k] {
				return Command{}, false
			}
			given[k] = true
			f := &active[k]
			if f.typ == boolType {
				if inline {
					return Command{}, false
				}
				out.FieldByIndex(f.index).SetBool(true)
				continue
			}
			if !inline {
				if i+1 == len(args) || strings.HasPrefix(args[i+1], "-") || !utf8.ValidString(args[i+1]) {
					return Command{}, false // kong: a missing value
				}
				i++
				value = args[i]
			}
			if !set(out.FieldByIndex(f.index), f.typ, value) {
				return Command{}, false
			}
		case strings.HasPrefix(a, "-"):
			return Command{}, false // short flags, "-", negative numbers
		default:
			if verb != nil {
				return Command{}, false // kong: an unexpected argument
			}
			for j := range root.verbs {
				if root.verbs[j].name == a {
					verb = &root.verbs[j]
					break
				}
			}
			if verb == nil {
				return Command{}, false
			}
			var sub node
			if !sub.read(verb.typ, verb.index) || len(sub.verbs) > 0 || sub.arg != nil {
				return Command{}, false
			}
			// A verb's flags join the root's, which it inherits.
			active = append(append([]flag(nil), active...), sub.flags...)
			given = append(given, make([]bool, len(sub.flags))...)
		}
	}
	if len(root.verbs) > 0 && verb == nil {
		return Command{}, false
	}
	for k := range active {
		f := &active[k]
		if given[k] {
			continue
		}
		if f.env != "" {
			if v, ok := lookupEnv(f.env); ok {
				if f.typ == boolType || !set(out.FieldByIndex(f.index), f.typ, v) {
					return Command{}, false
				}
				continue
			}
		}
		if f.required {
			return Command{}, false
		}
	}
	rv.Elem().Set(out)
	if verb == nil {
		return Command{}, true
	}
	return Command{Name: verb.name, Target: rv.Elem().FieldByIndex(verb.index).Addr().Interface()}, true
}

// lookupEnv reads env defaults, as kong does.
var lookupEnv = os.LookupEnv

// node is what quick knows of one level of a grammar.
type node struct {
	flags []flag
	verbs []verbField
	arg   *flag // a passthrough []string, for a grammar without verbs
}

// flag is one long flag.
type flag struct {
	name     string
	env      string
	required bool
	typ      reflect.Type
	index    []int // from the grammar's root
}

// verbField is one verb: a struct field tagged cmd.
type verbField struct {
	name  string
	typ   reflect.Type
	index []int
}

var (
	boolType     = reflect.TypeFor[bool]()
	durationType = reflect.TypeFor[time.Duration]()
)

// hooks are the methods through which kong lets a grammar act during a
// parse; a type with any of them is left to kong.
var hooks = [...]string{"BeforeReset", "BeforeResolve", "BeforeApply", "AfterApply", "Validate", "Signature", "Decode", "UnmarshalText", "UnmarshalJSON"}

// flagType reports whether quick converts values of t exactly as kong's
// mappers do: string, bool, int64, float64, time.Duration, and pointers
// to them (but bool).
func flagType(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer && t.Elem() != boolType {
		t = t.Elem()
	}
	switch t {
	case reflect.TypeFor[string](), boolType, reflect.TypeFor[int64](), reflect.TypeFor[float64](), durationType:
		return true
	}
	return false
}

// read adds the fields of struct type t, found at index from the root, to
// n, and reports whether quick can parse all of them as kong would.
func (n *node) read(t reflect.Type, index []int) bool {
	if hasHook(t) {
		return false
	}
	for i := range t.NumField() {
		ft := t.Field(i)
		at := append(append([]int(nil), index...), i)
		tag, ok := readTag(ft.Tag)
		if !ok {
			return false
		}
		switch {
		case ft.Anonymous:
			// kong flattens an embedded struct into its parent.
			if ft.Type.Kind() != reflect.Struct || tag != (fieldTag{}) || !n.read(ft.Type, at) {
				return false
			}
		case !ft.IsExported():
			return false
		case tag.cmd:
			if ft.Type.Kind() != reflect.Struct || tag.env != "" || tag.required || tag.optional || tag.arg {
				return false
			}
			n.verbs = append(n.verbs, verbField{name: tag.nameOr(ft.Name), typ: ft.Type, index: at})
		case tag.arg:
			// The one shape in use: an optional partial passthrough.
			if ft.Type != reflect.TypeFor[[]string]() || !tag.optional || tag.passthrough != "partial" || tag.env != "" || n.arg != nil {
				return false
			}
			n.arg = &flag{name: tag.nameOr(ft.Name), typ: ft.Type, index: at}
		default:
			name := tag.nameOr(ft.Name)
			if !flagType(ft.Type) || name == "" || tag.optional || tag.passthrough != "" {
				return false
			}
			n.flags = append(n.flags, flag{name: name, env: tag.env, required: tag.required, typ: ft.Type, index: at})
		}
	}
	return true
}

// hasHook reports whether t or *t has a method kong would call.
func hasHook(t reflect.Type) bool {
	for _, m := range hooks {
		if _, ok := reflect.PointerTo(t).MethodByName(m); ok {
			return true
		}
	}
	return false
}

// fieldTag is what a struct tag says to kong, limited to the keys that
// change nothing in a parse (help, placeholder, group, hidden) or that
// quick follows. Any other key makes readTag fail.
type fieldTag struct {
	cmd, arg, required, optional bool
	name, env, passthrough       string
}

// nameOr is the flag or verb name kong derives: the name tag, else the
// field's name in lower case with a dash between words. Only field names
// made of capitalised words are derived here ("OwnerPattern"); any other
// (acronyms, digits) gives "" and quick declines.
func (t fieldTag) nameOr(field string) string {
	if t.name != "" {
		return t.name
	}
	var b strings.Builder
	for i, r := range field {
		switch {
		case r >= 'A' && r <= 'Z':
			if i > 0 {
				if prev := field[i-1]; prev < 'a' || prev > 'z' {
					return ""
				}
				b.WriteByte('-')
			}
			b.WriteRune(r + 'a' - 'A')
		case r >= 'a' && r <= 'z':
			if i == 0 {
				return ""
			}
			b.WriteRune(r)
		default:
			return ""
		}
	}
	return b.String()
}

// readTag reads a struct tag in the conventional key:"value" form. It
// fails on a key quick does not follow, on a flag-like key with a value
// (kong reads only its presence), and on a name or env that kong would
// split or interpolate.
func readTag(tag reflect.StructTag) (fieldTag, bool) {
	var t fieldTag
	s := string(tag)
	for {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			return t, true
		}
		colon := strings.IndexByte(s, ':')
		if colon <= 0 || colon+1 >= len(s) || s[colon+1] != '"' {
			return t, false
		}
		key := s[:colon]
		end := colon + 2
		for end < len(s) && s[end] != '"' {
			if s[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(s) {
			return t, false
		}
		raw := s[colon+1 : end+1]
		s = s[end+1:]
		if len(s) > 0 && s[0] != ' ' {
			return t, false
		}
		switch key {
		case "help", "placeholder", "group":
			continue
		}
		value, err := strconv.Unquote(raw)
		if err != nil {
			return t, false
		}
		switch key {
		case "cmd", "arg", "required", "optional", "hidden":
			if value != "" {
				return t, false
			}
			t.cmd = t.cmd || key == "cmd"
			t.arg = t.arg || key == "arg"
			t.required = t.required || key == "required"
			t.optional = t.optional || key == "optional"
		case "name", "env", "passthrough":
			if value == "" || strings.ContainsAny(value, "$, =") {
				return t, false
			}
			switch key {
			case "name":
				t.name = value
			case "env":
				t.env = value
			default:
				t.passthrough = value
			}
		default:
			return t, false
		}
	}
}

// flagIndex is the position of the flag called name in flags, or -1.
func flagIndex(flags []flag, name string) int {
	for i := range flags {
		if flags[i].name == name {
			return i
		}
	}
	return -1
}

// set converts s as kong's mapper for typ does and stores it in v; it
// reports false where kong would report an error.
func set(v reflect.Value, typ reflect.Type, s string) bool {
	if typ.Kind() == reflect.Pointer {
		p := reflect.New(typ.Elem())
		if !set(p.Elem(), typ.Elem(), s) {
			return false
		}
		v.Set(p)
		return true
	}
	switch typ {
	case durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return false
		}
		v.SetInt(int64(d))
		return true
	}
	switch typ.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Int64:
		n, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return false
		}
		v.SetInt(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return false
		}
		v.SetFloat(f)
	default:
		return false
	}
	return true
}
