package gates

import "time"

// Gate is a validated gate file.
type Gate struct {
	// Path is the absolute path of the gate file, as named (symlinks are
	// not resolved).
	Path string
	// Dir is the directory of Path; phases run there and a relative pool
	// path is resolved against it.
	Dir string
	// Pool is the absolute, cleaned path of the pool file ("" with Kind).
	Pool string
	// Kind is the lease kind of a baton ("" with Pool); it satisfies
	// lease.ValidKind.
	Kind string
	// Owner is the lease owner ("" when absent).
	Owner string
	// TTLMinutes is the lease TTL in minutes (0 when absent), in
	// (0, lease.MaxTTLMinutes].
	TTLMinutes float64
	// Heartbeat is the heartbeat interval (0 when absent).
	Heartbeat time.Duration
	// KillGrace is how long a phase may take to exit after it is signalled
	// (0 when absent).
	KillGrace time.Duration
	// Env is the env mapping in file order, values unexpanded; see
	// [Gate.Expand].
	Env []EnvVar
	// Phases are the phases to run, in order; there is at least one.
	Phases []Phase

	// display is the path as given to Parse, used in messages; Path when
	// empty.
	display string
}

// EnvVar is one entry of a gate file's env mapping.
type EnvVar struct {
	// Name matches ^[A-Za-z_][A-Za-z0-9_]*$.
	Name string
	// Value is the text as written, before expansion: a string's value, or
	// the literal text of a number or boolean.
	Value string
	// Line and Column are the position of the entry's name.
	Line, Column int
}

// Phase is one phase of a gate.
type Phase struct {
	// Name is the phase's name, "phase-N" (1-based) when not given; names
	// are unique within a gate.
	Name string
	// Run is the phase's shell text (bash); it parses and has at least one
	// command.
	Run string
	// Reset reports whether the pool slot is reset before the phase. Its
	// default is true for every phase but the first with a pool, and false
	// with a baton kind, which has no slot.
	Reset bool
	// Timeout bounds the phase's run time; 0 means none.
	Timeout time.Duration
	// Line and Column are the position of the phase's mapping.
	Line, Column int
}

// Limits on what Load and Parse accept.
const (
	// maxFileSize bounds a gate file at 1 MiB.
	maxFileSize = 1 << 20
	// maxTokens bounds the YAML tokens of a gate file (comments aside). The
	// YAML parser is superlinear in the number of keys and nesting depth,
	// so a hostile file just under the size limit could otherwise keep it
	// busy for minutes; a real gate file has a few hundred tokens.
	maxTokens = 10_000
)

func (g *Gate) displayPath() string {
	if g.display != "" {
		return g.display
	}
	return g.Path
}
