package gates

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// position is where a node starts: a block mapping at its first key, a key
// and value pair at its key, anything else at its first token.
func position(n ast.Node) (line, col int) {
	switch v := n.(type) {
	case nil:
		return 0, 0
	case *ast.MappingNode:
		if v != nil && !v.IsFlowStyle && len(v.Values) > 0 {
			return position(v.Values[0])
		}
	case *ast.MappingValueNode:
		if v != nil && v.Key != nil {
			return position(v.Key)
		}
	case *ast.DocumentNode:
		if v != nil {
			return docPosition(v)
		}
	}
	if tk := safeToken(n); tk != nil && tk.Position != nil {
		return tk.Position.Line, tk.Position.Column
	}
	return 0, 0
}

// safeToken is n.GetToken(), or nil where the node has no token.
func safeToken(n ast.Node) (tk *token.Token) {
	defer func() {
		if recover() != nil {
			tk = nil
		}
	}()
	return n.GetToken()
}

// describe names a node's YAML type for messages, with short scalar text.
func describe(n ast.Node) string {
	switch v := n.(type) {
	case nil, *ast.NullNode:
		return "null (no value)"
	case *ast.BoolNode:
		return fmt.Sprintf("a boolean (%s)", v.Token.Value)
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return fmt.Sprintf("a number (%s)", nodeText(n))
	case *ast.StringNode:
		return "a string"
	case *ast.LiteralNode:
		return "a block string"
	case *ast.MappingNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	default:
		return "a " + n.Type().String()
	}
}

// eachEntry calls f for each key and value of mapping m in order, after
// checking that the key is a plain string and not a repeat. what names the
// mapping in messages.
func (w *walker) eachEntry(m *ast.MappingNode, what string, f func(key string, k, v ast.Node) error) error {
	seen := make(map[string]ast.Node, len(m.Values))
	for _, mv := range m.Values {
		k, ok := mv.Key.(*ast.StringNode)
		if !ok {
			if _, complex := mv.Key.(*ast.MappingKeyNode); complex {
				return w.errorf(mv.Key, "complex keys (?) are not supported in %s", what)
			}
			return w.errorf(mv.Key, "a key in %s must be a string, found %s", what, describe(mv.Key))
		}
		if first, dup := seen[k.Value]; dup {
			line, col := position(first)
			return w.errorf(k, "duplicate key %q in %s (first at %d:%d)", k.Value, what, line, col)
		}
		seen[k.Value] = k
		if err := f(k.Value, k, mv.Value); err != nil {
			return err
		}
	}
	return nil
}

// unknownKey reports a key outside allowed, pointing out a case mismatch.
func (w *walker) unknownKey(k ast.Node, key, what string, allowed []string) error {
	for _, a := range allowed {
		if strings.EqualFold(a, key) {
			return w.errorf(k, "unknown key %q in %s; did you mean %q? (keys are case-sensitive)", key, what, a)
		}
	}
	return w.errorf(k, "unknown key %q in %s; allowed keys: %s", key, what, strings.Join(allowed, ", "))
}

// stringValue returns the text of a string scalar (plain, quoted or block).
func (w *walker) stringValue(v ast.Node, key string) (string, error) {
	switch s := v.(type) {
	case *ast.StringNode:
		return s.Value, nil
	case *ast.LiteralNode:
		if s.Value == nil {
			return "", nil
		}
		return s.Value.Value, nil
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode, *ast.BoolNode:
		return "", w.errorf(v, "%s must be a string, found %s; quote it: %s: %q", key, describe(v), key, nodeText(v))
	default:
		return "", w.errorf(v, "%s must be a string, found %s", key, describe(v))
	}
}

// boolValue returns a boolean scalar.
func (w *walker) boolValue(v ast.Node, key string) (bool, error) {
	if b, ok := v.(*ast.BoolNode); ok {
		return b.Value, nil
	}
	if s, ok := v.(*ast.StringNode); ok {
		return false, w.errorf(v, "%s must be true or false, found the string %q", key, s.Value)
	}
	return false, w.errorf(v, "%s must be true or false, found %s", key, describe(v))
}

// durationValue returns a positive Go duration written as a string
// ("30s", "1m30s").
func (w *walker) durationValue(v ast.Node, key string) (time.Duration, error) {
	var text string
	switch s := v.(type) {
	case *ast.StringNode:
		text = s.Value
	case *ast.IntegerNode, *ast.FloatNode:
		t := nodeText(v)
		return 0, w.errorf(v, "%s must be a duration with a unit, found the bare number %s; write %ss (or %sm)", key, t, t, t)
	default:
		return 0, w.errorf(v, "%s must be a duration such as \"30s\" or \"5m\", found %s", key, describe(v))
	}
	d, err := time.ParseDuration(text)
	if err != nil {
		if _, nerr := strconv.ParseFloat(text, 64); nerr == nil {
			return 0, w.errorf(v, "%s %q has no unit; write %ss (or %sm)", key, text, text, text)
		}
		return 0, w.errorf(v, "%s %q is not a duration such as \"30s\" or \"5m\": %v", key, text, trimDurationErr(err))
	}
	if d <= 0 {
		return 0, w.errorf(v, "%s %q must be greater than zero", key, text)
	}
	return d, nil
}

// trimDurationErr drops the "time: " prefix of time.ParseDuration's errors.
func trimDurationErr(err error) string {
	return strings.TrimPrefix(err.Error(), "time: ")
}

// numberValue returns a numeric scalar as a float64, +Inf for a number too
// large for one. A plain scalar too long for the YAML parser's integers
// (which it leaves a string) still counts as a number.
func (w *walker) numberValue(v ast.Node, key string) (float64, error) {
	switch n := v.(type) {
	case *ast.IntegerNode:
		switch x := n.Value.(type) {
		case int64:
			return float64(x), nil
		case uint64:
			return float64(x), nil
		}
		return parseFloatText(n.Token.Value), nil
	case *ast.FloatNode:
		return parseFloatText(n.Token.Value), nil
	case *ast.InfinityNode:
		return n.Value, nil
	case *ast.NanNode:
		return math.NaN(), nil
	case *ast.StringNode:
		if n.Token.Type == token.StringType {
			if _, err := strconv.ParseFloat(n.Value, 64); err == nil || errors.Is(err, strconv.ErrRange) {
				return parseFloatText(n.Value), nil
			}
		}
		return 0, w.errorf(v, "%s must be a number, found the string %q; write it unquoted", key, n.Value)
	default:
		return 0, w.errorf(v, "%s must be a number, found %s", key, describe(v))
	}
}

// parseFloatText parses a decimal number, giving ±Inf when it is out of
// range and NaN when it does not parse at all.
func parseFloatText(s string) float64 {
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return math.NaN()
	}
	return f
}
