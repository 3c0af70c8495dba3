package gates

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/goccy/go-yaml/ast"
	"mvdan.cc/sh/v3/syntax"
)

// phaseKeys are the keys of a phase mapping.
var phaseKeys = []string{"name", "run", "reset", "timeout"}

// phaseSpec is a phase as written, before defaults are resolved.
type phaseSpec struct {
	Phase
	node      ast.Node // the phase's mapping
	nameNode  ast.Node // nil when the name is the default
	resetNode ast.Node // nil when reset is not given
}

// phases checks the phases list; it returns at least one phase.
func (w *walker) phases(v ast.Node) ([]phaseSpec, error) {
	seq, ok := v.(*ast.SequenceNode)
	if !ok {
		return nil, w.errorf(v, "phases must be a list of phases (- run: ...), found %s", describe(v))
	}
	if len(seq.Values) == 0 {
		return nil, w.errorf(v, "phases is empty: list at least one phase with a run command")
	}
	specs := make([]phaseSpec, 0, len(seq.Values))
	byName := make(map[string]int, len(seq.Values))
	for i, item := range seq.Values {
		p, err := w.phase(item, i+1)
		if err != nil {
			return nil, err
		}
		if first, dup := byName[p.Name]; dup {
			at := p.nameNode
			if at == nil {
				at = p.node
			}
			return nil, w.errorf(at, "duplicate phase name %q (phase %d at %d:%d has it); phase names must be unique",
				p.Name, first+1, specs[first].Line, specs[first].Column)
		}
		byName[p.Name] = i
		specs = append(specs, p)
	}
	return specs, nil
}

// phase checks phase number n (1-based).
func (w *walker) phase(item ast.Node, n int) (phaseSpec, error) {
	m, ok := item.(*ast.MappingNode)
	if !ok {
		if s, isString := item.(*ast.StringNode); isString {
			return phaseSpec{}, w.errorf(item, "phase %d must be a mapping with a run key, found a string; write - run: %s", n, s.Value)
		}
		return phaseSpec{}, w.errorf(item, "phase %d must be a mapping with a run key, found %s", n, describe(item))
	}
	p := phaseSpec{node: m}
	p.Line, p.Column = position(m)
	what := fmt.Sprintf("phase %d", n)
	var runNode ast.Node
	err := w.eachEntry(m, what, func(key string, k, v ast.Node) error {
		var err error
		switch key {
		case "name":
			p.nameNode = v
			p.Name, err = w.phaseName(v)
		case "run":
			runNode = v
			p.Run, err = w.stringValue(v, "run")
		case "reset":
			p.resetNode = v
			p.Reset, err = w.boolValue(v, key)
		case "timeout":
			p.Timeout, err = w.durationValue(v, key)
		default:
			err = w.unknownKey(k, key, what, phaseKeys)
		}
		return err
	})
	if err != nil {
		return phaseSpec{}, err
	}
	if p.nameNode == nil {
		p.Name = fmt.Sprintf("phase-%d", n)
	}
	if runNode == nil {
		return phaseSpec{}, w.errorf(m, "phase %d (%s) has no run key: give the shell command to run", n, p.Name)
	}
	if err := w.checkShell(m, p.Run, n, p.Name); err != nil {
		return phaseSpec{}, err
	}
	return p, nil
}

// phaseName checks an explicit phase name: non-blank and free of control
// characters, since it labels log lines.
func (w *walker) phaseName(v ast.Node) (string, error) {
	name, err := w.stringValue(v, "name")
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(name) == "" {
		return "", w.errorf(v, "name must not be empty; leave the key out for the default phase-N")
	}
	if strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return "", w.errorf(v, "name %q must not contain control characters such as newlines or tabs", name)
	}
	return name, nil
}

// checkShell requires run to be bash that parses and has a command; m is
// the phase's mapping, where problems are reported.
func (w *walker) checkShell(m ast.Node, run string, n int, name string) error {
	if strings.TrimSpace(run) == "" {
		return w.errorf(m, "phase %d (%s) has an empty run: give the shell command to run", n, name)
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(run), "")
	if err != nil {
		return w.errorf(m, "phase %d (%s): run is not valid bash: %v", n, name, err)
	}
	if len(f.Stmts) == 0 {
		return w.errorf(m, "phase %d (%s): run has only comments; give the shell command to run", n, name)
	}
	return nil
}

// resolvePhases settles the reset defaults: a pool resets its slot before
// every phase but the first, and a baton has no slot to reset.
func (w *walker) resolvePhases(specs []phaseSpec, baton bool) ([]Phase, error) {
	out := make([]Phase, len(specs))
	for i, p := range specs {
		if p.resetNode == nil {
			p.Reset = !baton && i > 0
		} else if baton && p.Reset {
			return nil, w.errorf(p.resetNode, "reset: true needs a pool slot to reset; a kind (baton) lease has none")
		}
		out[i] = p.Phase
	}
	return out, nil
}
