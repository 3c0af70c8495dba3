package doctest

import (
	"bufio"
	"fmt"
	"strings"
)

// Block is one fenced code block of a Markdown document.
type Block struct {
	Line int    // the line of its opening fence, from 1
	Info string // the fence's info string: "sh", "yaml", ""
	Mark Mark   // the doctest comment just before the fence, if any
	Text string // the lines between the fences, each ending in "\n"
}

// Mark is what a <!-- doctest: ... --> comment says about the next block.
type Mark struct {
	Kind string // "", "norun", "etcd" or "file"
	Arg  string // the reason, the address to replace, or the file
}

// Runs reports whether the block is one the test runs.
func (b Block) Runs() bool { return b.Info == "sh" && b.Mark.Kind != "norun" }

const markPrefix = "<!-- doctest:"

// Blocks returns the fenced blocks of a Markdown document, with their
// marks. A mark that is not one of the known kinds, a norun without a
// reason, an etcd or file mark without its argument, a mark not followed
// by a fence and an unclosed fence are errors.
func Blocks(doc string) ([]Block, error) {
	var (
		out     []Block
		pending *Mark
		markAt  int
		open    *Block
		fence   string
		ind     int // the opening fence's indent, which its lines lose
		text    strings.Builder
	)
	sc := bufio.NewScanner(strings.NewReader(doc))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if open != nil {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, "`~") == "" {
				open.Text = text.String()
				out = append(out, *open)
				open = nil
				continue
			}
			// A fence inside a list item is indented; so are its lines.
			text.WriteString(line[min(len(line), ind, len(line)-len(strings.TrimLeft(line, " "))):])
			text.WriteByte('\n')
			continue
		}
		if f, info, ok := openingFence(trimmed); ok {
			b := &Block{Line: n, Info: info}
			if pending != nil {
				if markAt != n-1 {
					return nil, fmt.Errorf("line %d: the doctest mark must be the line just before its fence", markAt)
				}
				b.Mark, pending = *pending, nil
			}
			open, fence, ind = b, f, len(line)-len(strings.TrimLeft(line, " "))
			text.Reset()
			continue
		}
		if pending != nil {
			return nil, fmt.Errorf("line %d: a doctest mark not followed by a fence", markAt)
		}
		if strings.HasPrefix(trimmed, markPrefix) {
			m, err := parseMark(trimmed)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			pending, markAt = &m, n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if open != nil {
		return nil, fmt.Errorf("line %d: a fence that is never closed", open.Line)
	}
	if pending != nil {
		return nil, fmt.Errorf("line %d: a doctest mark not followed by a fence", markAt)
	}
	return out, nil
}

// openingFence reports whether line opens a fenced block: three or more
// backquotes or tildes, then the info string.
func openingFence(line string) (fence, info string, ok bool) {
	for _, c := range []string{"```", "~~~"} {
		if strings.HasPrefix(line, c) {
			n := len(line) - len(strings.TrimLeft(line, c[:1]))
			return line[:n], strings.TrimSpace(line[n:]), true
		}
	}
	return "", "", false
}

// parseMark reads a <!-- doctest: KIND ARG --> comment.
func parseMark(line string) (Mark, error) {
	body, ok := strings.CutSuffix(strings.TrimPrefix(line, markPrefix), "-->")
	if !ok {
		return Mark{}, fmt.Errorf("a doctest mark must be one line ending in -->")
	}
	body = strings.TrimSpace(body)
	kind, arg, _ := strings.Cut(body, " ")
	kind, arg = strings.TrimSuffix(kind, ":"), strings.TrimSpace(arg)
	switch kind {
	case "norun", "etcd", "file":
		if arg == "" {
			return Mark{}, fmt.Errorf("doctest %s needs %s", kind, map[string]string{
				"norun": "a reason (<!-- doctest: norun: why -->)",
				"etcd":  "the address the block names (<!-- doctest: etcd 127.0.0.1:2379 -->)",
				"file":  "the file's path (<!-- doctest: file examples/pool/gate.yaml -->)",
			}[kind])
		}
		return Mark{Kind: kind, Arg: arg}, nil
	}
	return Mark{}, fmt.Errorf("unknown doctest mark %q: use norun, etcd or file", kind)
}
