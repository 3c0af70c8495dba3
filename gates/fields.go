package gates

import (
	"path/filepath"

	"github.com/goccy/go-yaml/ast"

	"github.com/durable-lease/durable-lease/lease"
)

// topKeys are the keys of a gate file's top-level mapping, in the order
// the documentation lists them.
var topKeys = []string{"pool", "kind", "owner", "ttl", "heartbeat", "killGrace", "env", "phases"}

// gate fills g from the document body, checking every field.
func (w *walker) gate(body ast.Node, g *Gate) error {
	m, ok := body.(*ast.MappingNode)
	if !ok {
		return w.errorf(body, "the top level of a gate file must be a mapping (pool:, phases:, ...), found %s", describe(body))
	}
	var (
		poolKey, kindKey ast.Node // the key that set pool or kind
		phases           []phaseSpec
	)
	err := w.eachEntry(m, "the gate file", func(key string, k, v ast.Node) error {
		var err error
		switch key {
		case "pool", "kind":
			if other := firstNonNil(poolKey, kindKey); other != nil {
				line, col := position(other)
				return w.errorf(k, "%s conflicts with %s at %d:%d: give either pool (a slot pool file) or kind (a single baton lease), not both",
					key, nodeText(other), line, col)
			}
			if key == "pool" {
				poolKey = k
				g.Pool, err = w.poolPath(v, g.Dir)
			} else {
				kindKey = k
				g.Kind, err = w.kind(v)
			}
		case "owner":
			g.Owner, err = w.stringValue(v, key)
			if err == nil && g.Owner == "" {
				err = w.errorf(v, "owner must not be empty; leave the key out for the default owner")
			}
		case "ttl":
			g.TTLMinutes, err = w.ttl(v)
		case "heartbeat":
			g.Heartbeat, err = w.durationValue(v, key)
		case "killGrace":
			g.KillGrace, err = w.durationValue(v, key)
		case "env":
			g.Env, err = w.env(v)
		case "phases":
			phases, err = w.phases(v)
		default:
			err = w.unknownKey(k, key, "the gate file", topKeys)
		}
		return err
	})
	if err != nil {
		return err
	}
	if poolKey == nil && kindKey == nil {
		return w.errorf(m, "the gate file needs pool (a slot pool file) or kind (a single baton lease)")
	}
	if phases == nil {
		return w.errorf(m, "the gate file has no phases: list at least one phase with a run command")
	}
	g.Phases, err = w.resolvePhases(phases, kindKey != nil)
	return err
}

func firstNonNil(nodes ...ast.Node) ast.Node {
	for _, n := range nodes {
		if n != nil {
			return n
		}
	}
	return nil
}

// poolPath returns the absolute, cleaned pool file path, resolving a
// relative one against dir (the gate file's directory).
func (w *walker) poolPath(v ast.Node, dir string) (string, error) {
	p, err := w.stringValue(v, "pool")
	if err != nil {
		return "", err
	}
	if p == "" {
		return "", w.errorf(v, "pool must name the pool file, found an empty string")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return filepath.Clean(p), nil
}

// kind returns a baton lease kind.
func (w *walker) kind(v ast.Node) (string, error) {
	k, err := w.stringValue(v, "kind")
	if err != nil {
		return "", err
	}
	if !lease.ValidKind(k) {
		return "", w.errorf(v, "kind %q must match %s", k, lease.KindPattern)
	}
	return k, nil
}

// ttl returns the lease TTL in minutes.
func (w *walker) ttl(v ast.Node) (float64, error) {
	f, err := w.numberValue(v, "ttl")
	if err != nil {
		return 0, err
	}
	if !lease.ValidTTL(f) {
		return 0, w.errorf(v, "ttl %s must be a number of minutes %s", nodeText(v), lease.TTLRange)
	}
	return f, nil
}
