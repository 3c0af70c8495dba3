package gates

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// envNamePattern is the shape of an env name, checked by validEnvName.
const envNamePattern = `^[A-Za-z_][A-Za-z0-9_]*$`

// env checks the env mapping: names matching envNamePattern, each once,
// and scalar values whose references are well formed.
func (w *walker) env(v ast.Node) ([]EnvVar, error) {
	m, ok := v.(*ast.MappingNode)
	if !ok {
		return nil, w.errorf(v, "env must be a mapping of NAME: value, found %s", describe(v))
	}
	vars := make([]EnvVar, 0, len(m.Values))
	err := w.eachEntry(m, "env", func(name string, k, v ast.Node) error {
		if !validEnvName(name) {
			return w.errorf(k, "env name %q must match %s", name, envNamePattern)
		}
		value, err := w.envValue(v, name)
		if err != nil {
			return err
		}
		if _, err := expandRefs(value, func(string, string) (string, error) { return "", nil }); err != nil {
			return w.errorf(v, "env %s: %v", name, err)
		}
		line, col := position(k)
		vars = append(vars, EnvVar{Name: name, Value: value, Line: line, Column: col})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return vars, nil
}

// envValue returns an env value's text: a string's value, or the literal
// text of a number or boolean as written.
func (w *walker) envValue(v ast.Node, name string) (string, error) {
	switch s := v.(type) {
	case *ast.StringNode, *ast.LiteralNode:
		return w.stringValue(v, name)
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode, *ast.BoolNode:
		return nodeText(s), nil
	case nil, *ast.NullNode:
		return "", w.errorf(v, "env %s has no value; write %s: \"\" for an empty string", name, name)
	default:
		return "", w.errorf(v, "env %s must be a string, number or boolean, found %s", name, describe(v))
	}
}

func validEnvName(s string) bool {
	if s == "" || !isNameStart(s[0]) {
		return false
	}
	return nameLen(s) == len(s)
}

func isNameStart(c byte) bool { return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }
func isNameByte(c byte) bool  { return isNameStart(c) || c >= '0' && c <= '9' }

// nameLen is the length of the run of name bytes at the start of s.
func nameLen(s string) int {
	n := 0
	for n < len(s) && isNameByte(s[n]) {
		n++
	}
	return n
}

// expandRefs copies s with "$$" replaced by "$" and each ${NAME} or $NAME
// replaced by resolve(NAME, ref), ref being the reference as written. A
// "$" followed by anything else, an unterminated "${" or a "${...}" that
// does not hold a name is an error.
func expandRefs(s string, resolve func(name, ref string) (string, error)) (string, error) {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		rest := s[i+1:]
		var name, ref string
		switch {
		case strings.HasPrefix(rest, "$"):
			b.WriteByte('$')
			s = rest[1:]
			continue
		case strings.HasPrefix(rest, "{"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return "", fmt.Errorf(`unterminated "${" (write $$ for a literal $)`)
			}
			name, ref = rest[1:end], "${"+rest[1:end]+"}"
			if !validEnvName(name) {
				return "", fmt.Errorf("malformed reference %q: only ${NAME} is supported, NAME matching %s (write $$ for a literal $)",
					clip(ref), envNamePattern)
			}
			s = rest[end+1:]
		case rest != "" && isNameStart(rest[0]):
			n := nameLen(rest)
			name, ref = rest[:n], "$"+rest[:n]
			s = rest[n:]
		default:
			return "", fmt.Errorf(`a "$" not followed by a name or {name} (write $$ for a literal $)`)
		}
		val, err := resolve(name, ref)
		if err != nil {
			return "", err
		}
		b.WriteString(val)
	}
}
