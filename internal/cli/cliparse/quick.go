package cliparse

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/durable-lease/durable-lease/internal/cli/suggest"
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

// quick parses a command line as kong would, without building kong's
// model of the whole grammar, and reports whether it read it (a plain
// command line nearly every call uses: no help, no mistake). See scan.
//
// On success the grammar's root flags and the selected verb are filled;
// the other verbs' fields stay zero, where kong would also give them their
// env defaults. Nothing reads those: a verb sees its own struct and the
// root.
func quick(grammar any, args []string) (Command, bool) {
	cmd, help, err := scan(grammar, args)
	return cmd, err == nil && !help
}

// errUnreadable reports a grammar quick cannot read as kong would (a tag
// or a hook it does not know): a fault of the program, not of the user.
var errUnreadable = errors.New("cliparse: the grammar has a field the quick parser does not read")

// stricterError is a mistake quick reports where kong reads on: a flag
// given twice (kong keeps the last) or a word that is not UTF-8 (kong
// replaces its bytes with U+FFFD). Both are better refused than guessed.
type stricterError struct{ usageError }

// scan reads args by grammar exactly as kong reads the shapes it knows:
// long flags of the selected verb and of the root, as --name value or
// --name=value; string, bool, int64, float64 and time.Duration flags and
// pointers to them; env defaults; required flags; --help and -h; and,
// for a grammar without verbs, a trailing passthrough command. It reads
// the words left to right and stops at the first mistake, as kong does,
// so that the error is the one kong would give first:
//
//   - a word that is no verb, or one after the verb: "unexpected argument X";
//   - a flag the verb (or the root) does not have: "unknown flag --X";
//   - a flag without its value, or whose value does not convert;
//   - a flag given twice, or a word that is not UTF-8 ([stricterError]);
//
// then, if --help or -h was among the words, help reports it (cmd.Name is
// the verb whose help was asked, "" for the root), before a flag given
// twice or a required flag missed; then a flag given twice; then an env
// default that does not convert, and the required flags that are missing
// ("missing flags: --a=A, --b=B", sorted as kong sorts them).
//
// err is a usage error (ErrUsage) for a mistake, or errUnreadable when
// the grammar has a shape quick does not read.
func scan(grammar any, args []string) (cmd Command, help bool, err error) {
	rv := reflect.ValueOf(grammar)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return Command{}, false, errUnreadable
	}
	var root node
	if !root.read(rv.Elem().Type(), nil) {
		return Command{}, false, errUnreadable
	}
	out := reflect.New(rv.Elem().Type()).Elem()
	active := root.flags
	var verb *verbField
	given := make([]bool, len(active)) // per active flag, in order
	var twice error                    // the first flag given twice: help wins over it
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !utf8.ValidString(a) {
			return Command{}, false, &stricterError{usageError{"argument " + strconv.Itoa(i+1) + " is not valid UTF-8: " + strconv.QuoteToASCII(a)}}
		}
		switch {
		case root.arg != nil && (a == "--" || a == "-" || !strings.HasPrefix(a, "-")):
			// The passthrough command: kong keeps the "--" in it.
			if len(root.verbs) > 0 {
				return Command{}, false, errUnreadable
			}
			for j, rest := range args[i:] {
				if !utf8.ValidString(rest) {
					return Command{}, false, &stricterError{usageError{"argument " + strconv.Itoa(i+j+1) + " is not valid UTF-8: " + strconv.QuoteToASCII(rest)}}
				}
			}
			out.FieldByIndex(root.arg.index).Set(reflect.ValueOf(append([]string(nil), args[i:]...)))
			i = len(args)
		case a == "--":
			// Every word after it is an argument, and there are none
			// (kong still suggests the verbs a word is like).
			if i+1 < len(args) {
				var like []string
				if names := verbNames(root.verbs); verb == nil && !slices.Contains(names, args[i+1]) {
					like = suggest.Similar(args[i+1], names, false)
				}
				return Command{}, false, Usagef("%s", suggest.Phrase("unexpected argument "+args[i+1], like))
			}
		case a == "--help" || strings.HasPrefix(a, "--help="):
			if _, value, inline := strings.Cut(a, "="); inline {
				if _, ok := parseBool(value); !ok {
					return Command{}, false, Usagef("--help: %s", boolExpected(value))
				}
			}
			help = true
		case strings.HasPrefix(a, "--"):
			name, value, inline := strings.Cut(a[2:], "=")
			k := flagIndex(active, name)
			if k < 0 {
				return Command{}, false, unknownFlag("--"+name, active)
			}
			f := &active[k]
			if given[k] && twice == nil {
				twice = &stricterError{usageError{"--" + name + " is given twice: give each flag once"}}
			}
			given[k] = true
			if f.typ == boolType {
				b := true
				if inline {
					var ok bool
					if b, ok = parseBool(value); !ok {
						return Command{}, false, Usagef("--%s: %s", name, boolExpected(value))
					}
				}
				out.FieldByIndex(f.index).SetBool(b)
				continue
			}
			if !inline {
				switch {
				case i+1 == len(args):
					return Command{}, false, Usagef("--%s: expected a value after it", name)
				case strings.HasPrefix(args[i+1], "-") && args[i+1] != "-":
					return Command{}, false, Usagef("--%s: expected a value but got %q, which reads as a flag; to give it as the value, write --%s=%s", name, args[i+1], name, args[i+1])
				case !utf8.ValidString(args[i+1]):
					return Command{}, false, &stricterError{usageError{"argument " + strconv.Itoa(i+2) + " is not valid UTF-8: " + strconv.QuoteToASCII(args[i+1])}}
				}
				i++
				value = args[i]
			}
			if msg := set(out.FieldByIndex(f.index), f.typ, value); msg != "" {
				return Command{}, false, Usagef("--%s: %s", name, msg)
			}
		case strings.HasPrefix(a, "-") && a != "-":
			// Short flags: kong knows -h alone, and reads -hx as -h -x.
			if a[1] != 'h' {
				r, _ := utf8.DecodeRuneInString(a[1:])
				return Command{}, false, unknownFlag("-"+string(r), active)
			}
			if len(a) > 2 {
				return Command{}, false, errUnreadable
			}
			help = true
		default:
			if verb != nil || len(root.verbs) == 0 {
				return Command{}, false, Usagef("unexpected argument %s", a)
			}
			for j := range root.verbs {
				if root.verbs[j].name == a {
					verb = &root.verbs[j]
					break
				}
			}
			if verb == nil {
				return Command{}, false, Usagef("%s", suggest.Phrase("unexpected argument "+a, suggest.Similar(a, verbNames(root.verbs), false)))
			}
			var sub node
			if !sub.read(verb.typ, verb.index) || len(sub.verbs) > 0 || sub.arg != nil {
				return Command{}, false, errUnreadable
			}
			// A verb's flags join the root's, which it inherits.
			active = append(append([]flag(nil), active...), sub.flags...)
			given = append(given, make([]bool, len(sub.flags))...)
		}
	}
	if help {
		if verb != nil {
			return Command{Name: verb.name}, true, nil
		}
		return Command{}, true, nil
	}
	if twice != nil {
		return Command{}, false, twice
	}
	if len(root.verbs) > 0 && verb == nil {
		return Command{}, false, Usagef("expected one of %s", verbList(root.verbs))
	}
	var missing []string
	for k := range active {
		f := &active[k]
		if given[k] {
			continue
		}
		if f.env != "" {
			if v, ok := lookupEnv(f.env); ok {
				msg := ""
				if f.typ == boolType {
					var b bool
					if b, ok = parseBool(v); ok {
						out.FieldByIndex(f.index).SetBool(b)
					} else {
						msg = boolExpected(v)
					}
				} else {
					msg = set(out.FieldByIndex(f.index), f.typ, v)
				}
				if msg != "" {
					return Command{}, false, Usagef("$%s (the default of --%s): %s", f.env, f.name, msg)
				}
				continue
			}
		}
		if f.required {
			missing = append(missing, "--"+f.name+"="+f.placeholderOr())
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return Command{}, false, Usagef("missing flags: %s", strings.Join(missing, ", "))
	}
	rv.Elem().Set(out)
	if verb == nil {
		return Command{}, false, nil
	}
	return Command{Name: verb.name, Target: rv.Elem().FieldByIndex(verb.index).Addr().Interface()}, false, nil
}

// unknownFlag is kong's error for a flag the command line does not have,
// with kong's "did you mean" among the flags it has (help first, then the
// root's, then the verb's, as kong lists them).
func unknownFlag(flag string, active []flag) error {
	names := []string{"--help", "-h"}
	for _, f := range active {
		names = append(names, "--"+f.name)
	}
	return Usagef("%s", suggest.Phrase("unknown flag "+flag, suggest.Similar(flag, names, false)))
}

// verbNames is the verbs a user can type.
func verbNames(verbs []verbField) []string {
	var names []string
	for _, v := range verbs {
		if !v.hidden {
			names = append(names, v.name)
		}
	}
	return names
}

// VerbOf is the verb args name in grammar ("" for none, for a grammar
// without verbs, or for a first word that is no verb), read as scan
// reads it up to the verb: for a message to point at the verb's own help
// when the command line did not parse.
func VerbOf(grammar any, args []string) string {
	rv := reflect.ValueOf(grammar)
	var root node
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct || !root.read(rv.Elem().Type(), nil) || len(root.verbs) == 0 {
		return ""
	}
	unknown := false // the word before is a flag the root does not have
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return ""
		case strings.HasPrefix(a, "--"):
			name, _, inline := strings.Cut(a[2:], "=")
			k := flagIndex(root.flags, name)
			if k >= 0 && root.flags[k].typ != boolType && !inline {
				i++ // its value
			}
			unknown = k < 0 && !inline
		case strings.HasPrefix(a, "-") && a != "-":
			unknown = false
		default:
			for _, v := range root.verbs {
				if v.name == a {
					return a
				}
			}
			if !unknown {
				return ""
			}
			unknown = false // the value of a mistyped flag, perhaps
		}
	}
	return ""
}

// HelpHint is the line after a usage error: how to see the help of the
// verb args name, else of name itself.
func HelpHint(grammar any, name string, args []string) string {
	if verb := VerbOf(grammar, args); verb != "" {
		name += " " + verb
	}
	return "Run '" + name + " --help' for usage."
}

// verbList is the verbs a user can type, quoted, for "expected one of".
func verbList(verbs []verbField) string {
	var b strings.Builder
	for _, v := range verbs {
		if v.hidden {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(v.name))
	}
	return b.String()
}

// parseBool reads a bool flag's value as kong does.
func parseBool(s string) (value, ok bool) {
	switch s {
	case "true", "1", "yes":
		return true, true
	case "false", "0", "no":
		return false, true
	}
	return false, false
}

func boolExpected(got string) string {
	return "expected true, 1, yes, false, 0 or no but got " + strconv.Quote(got)
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
	name        string
	env         string
	placeholder string
	required    bool
	typ         reflect.Type
	index       []int // from the grammar's root
}

// verbField is one verb: a struct field tagged cmd.
type verbField struct {
	name   string
	hidden bool
	typ    reflect.Type
	index  []int
}

// placeholderOr is how kong names the flag's value in "missing flags":
// its placeholder tag, else its type in capitals.
func (f *flag) placeholderOr() string {
	if f.placeholder != "" {
		return f.placeholder
	}
	t := f.typ
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return strings.ToUpper(t.Name())
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
			n.verbs = append(n.verbs, verbField{name: tag.nameOr(ft.Name), hidden: tag.hidden, typ: ft.Type, index: at})
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
			n.flags = append(n.flags, flag{name: name, env: tag.env, placeholder: tag.placeholder, required: tag.required, typ: ft.Type, index: at})
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
	cmd, arg, required, optional, hidden bool
	name, env, passthrough, placeholder  string
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
		case "help", "group":
			continue
		}
		value, err := strconv.Unquote(raw)
		if err != nil {
			return t, false
		}
		if key == "placeholder" {
			t.placeholder = value
			continue
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
			t.hidden = t.hidden || key == "hidden"
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

// set converts s as kong's mapper for typ does and stores it in v; where
// kong would report an error it returns what was expected instead.
func set(v reflect.Value, typ reflect.Type, s string) string {
	if typ.Kind() == reflect.Pointer {
		p := reflect.New(typ.Elem())
		if msg := set(p.Elem(), typ.Elem(), s); msg != "" {
			return msg
		}
		v.Set(p)
		return ""
	}
	if typ == durationType {
		d, err := time.ParseDuration(s)
		if err != nil {
			return "expected a duration such as 90s or 1h30m but got " + strconv.Quote(s)
		}
		v.SetInt(int64(d))
		return ""
	}
	switch typ.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Int64:
		n, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return "expected a whole number (of at most 19 digits) but got " + strconv.Quote(s)
		}
		v.SetInt(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return "expected a number but got " + strconv.Quote(s)
		}
		v.SetFloat(f)
	default:
		return "cannot read a " + typ.String() // read refuses such grammars
	}
	return ""
}
