package cliparse

import (
	"errors"
	"reflect"
)

// This file is the seam package cliparsetest compares the quick parser
// with kong through: what quick reads of a grammar and of a command
// line, exported for tests and used by no executable.

// Shape is what the quick parser reads of a grammar: its root's long
// flags, its verbs, and whether it ends in a passthrough argument.
type Shape struct {
	Flags       []FlagShape
	Verbs       []VerbShape
	Passthrough bool // a passthrough []string, for a grammar without verbs
}

// FlagShape is one long flag: its name and the type of its field.
type FlagShape struct {
	Name string
	Type reflect.Type
}

// VerbShape is one verb: a struct field tagged cmd, at Index from the
// grammar's root, and its flags when quick reads it (Readable).
type VerbShape struct {
	Name     string
	Index    []int
	Flags    []FlagShape
	Readable bool
}

// ShapeOf is what quick reads of the grammar struct type t; ok is false
// when quick does not read the root (kong alone parses that grammar).
func ShapeOf(t reflect.Type) (s Shape, ok bool) {
	var root node
	ok = root.read(t, nil)
	s.Flags, s.Passthrough = flagShapes(root.flags), root.arg != nil
	for _, v := range root.verbs {
		var sub node
		readable := sub.read(v.typ, v.index)
		s.Verbs = append(s.Verbs, VerbShape{Name: v.name, Index: v.index, Flags: flagShapes(sub.flags), Readable: readable})
	}
	return s, ok
}

func flagShapes(flags []flag) []FlagShape {
	out := make([]FlagShape, len(flags))
	for i, f := range flags {
		out[i] = FlagShape{Name: f.name, Type: f.typ}
	}
	return out
}

// Scan parses args into grammar the quick way alone (see [Parse]): the
// verb selected, whether help was asked for, and a usage error for a
// mistake, or [ErrUnreadable].
func Scan(grammar any, args []string) (cmd Command, help bool, err error) { return scan(grammar, args) }

// ErrUnreadable reports a grammar with a field the quick parser does not
// read: kong alone parses it.
var ErrUnreadable = errUnreadable

// IsStricter reports a mistake quick refuses where kong reads on (a flag
// given twice, a word that is not UTF-8).
func IsStricter(err error) bool {
	var stricter *stricterError
	return errors.As(err, &stricter)
}

// Full is the full parser registered by [RegisterFull], nil when this
// executable links none.
func Full() FullParser { return full }
