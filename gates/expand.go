package gates

import "fmt"

// Expand returns "NAME=value" strings for g.Env, in order, with the
// references in each value expanded: ${NAME} and $NAME take the value of
// an earlier entry of g.Env (after its own expansion) or else
// lookup(NAME), and "$$" is a literal "$". An entry does not see itself or
// later entries, so PATH: ${PATH}:/opt/bin extends the outer PATH. A nil
// lookup defines nothing. Expanded text is not expanded again.
//
// A reference to a variable defined nowhere is an error, never an empty
// string, as is a malformed reference ("${", "${1x}", a "$" before
// anything but a name, "{" or "$"). Errors are [*Error] at the entry,
// matching [ErrInvalid].
func (g *Gate) Expand(lookup func(name string) (string, bool)) ([]string, error) {
	out := make([]string, 0, len(g.Env))
	defined := make(map[string]string, len(g.Env))
	for _, v := range g.Env {
		resolve := func(name, ref string) (string, error) {
			if val, ok := defined[name]; ok {
				return val, nil
			}
			if lookup != nil {
				if val, ok := lookup(name); ok {
					return val, nil
				}
			}
			return "", fmt.Errorf("%s is not defined: it is neither an earlier env entry nor set in the environment", clip(ref))
		}
		val, err := expandRefs(v.Value, resolve)
		if err != nil {
			return nil, errorAt(g.displayPath(), v.Line, v.Column, "env %s: %v", v.Name, err)
		}
		defined[v.Name] = val
		out = append(out, v.Name+"="+val)
	}
	return out, nil
}
