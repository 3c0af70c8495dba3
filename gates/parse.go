package gates

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	yamlparser "github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Parse validates data as a gate file. path names the file: it prefixes
// messages as given, and its absolute form sets Path and Dir, against which
// a relative pool path is resolved.
//
// Every error is an [*Error] matching [ErrInvalid]; it carries the line and
// column of the offending node when there is one.
func Parse(data []byte, path string) (*Gate, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, ioError(path, "cannot make the gate file's path absolute", err)
	}
	if len(data) > maxFileSize {
		return nil, tooLarge(path)
	}
	// A byte order mark is invisible in editors, so columns are counted
	// without it.
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	if err := checkText(data, path); err != nil {
		return nil, err
	}
	body, err := parseDocument(data, path)
	if err != nil {
		return nil, err
	}
	w := &walker{path: path}
	if err := w.refuseExtensions(body); err != nil {
		return nil, err
	}
	g := &Gate{Path: abs, Dir: filepath.Dir(abs), display: path}
	if err := w.gate(body, g); err != nil {
		return nil, err
	}
	return g, nil
}

// checkText refuses NUL bytes and invalid UTF-8, which the YAML parser
// would otherwise take apart in surprising ways.
func checkText(data []byte, path string) error {
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return errorAt(path, line, col, "invalid UTF-8 (byte 0x%02x); a gate file is UTF-8 text", data[i])
		case r == 0:
			return errorAt(path, line, col, "NUL byte; a gate file is text")
		case r == '\n', r == '\r' && (i+1 == len(data) || data[i+1] != '\n'):
			// YAML's line breaks are LF, CRLF and a lone CR.
			line, col = line+1, 1
		case r == '\r':
			// The CR of a CRLF; the LF ends the line.
		default:
			col++
		}
		i += size
	}
	return nil
}

// yamlError is what the goccy/go-yaml parser's errors implement.
type yamlError interface {
	GetToken() *token.Token
	GetMessage() string
}

// parseDocument parses data as YAML and returns the body of its only
// document.
func parseDocument(data []byte, path string) (ast.Node, error) {
	file, err := parseYAML(data, path)
	if err != nil {
		return nil, err
	}
	var docs []*ast.DocumentNode
	for _, d := range file.Docs {
		if d != nil {
			docs = append(docs, d)
		}
	}
	if len(docs) == 0 || len(docs) == 1 && docs[0].Body == nil {
		return nil, errorAt(path, 0, 0, "empty gate file")
	}
	if len(docs) > 1 {
		line, col := docPosition(docs[1])
		return nil, errorAt(path, line, col, "a second YAML document; a gate file is a single document (remove the ---)")
	}
	return docs[0].Body, nil
}

// parseYAML runs the goccy/go-yaml lexer and parser, bounding the number
// of tokens and turning a panic of the parser into an error.
func parseYAML(data []byte, path string) (file *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			file, err = nil, errorAt(path, 0, 0, "the YAML parser failed on this file: %v", r)
		}
	}()
	tokens := lexer.Tokenize(string(data))
	n := 0
	for _, tk := range tokens {
		if tk.Type == token.CommentType {
			continue
		}
		if n++; n > maxTokens {
			return nil, errorAt(path, tk.Position.Line, tk.Position.Column,
				"gate file is too complex: more than %d YAML tokens", maxTokens)
		}
	}
	file, err = yamlparser.Parse(tokens, 0, yamlparser.AllowDuplicateMapKey())
	if err == nil {
		return file, nil
	}
	var ye yamlError
	if errors.As(err, &ye) {
		line, col := 0, 0
		if tk := ye.GetToken(); tk != nil {
			line, col = tk.Position.Line, tk.Position.Column
		}
		return nil, errorAt(path, line, col, "YAML syntax error: %s", ye.GetMessage())
	}
	return nil, errorAt(path, 0, 0, "YAML syntax error: %v", err)
}

func docPosition(d *ast.DocumentNode) (line, col int) {
	if d.Start != nil {
		return d.Start.Position.Line, d.Start.Position.Column
	}
	if d.Body != nil {
		return position(d.Body)
	}
	return 0, 0
}

// walker validates the nodes of one gate file.
type walker struct {
	path string // the path as given, for messages
}

// errorf builds an *Error at node n.
func (w *walker) errorf(n ast.Node, format string, args ...any) *Error {
	line, col := position(n)
	return errorAt(w.path, line, col, format, args...)
}

// refuseExtensions refuses anchors, aliases, merge keys and tags anywhere
// in the tree, reporting the first in document order.
func (w *walker) refuseExtensions(n ast.Node) error {
	switch n := n.(type) {
	case *ast.AnchorNode:
		return w.errorf(n, "YAML anchors (&%s) are not supported in a gate file; repeat the value instead", nodeText(n.Name))
	case *ast.AliasNode:
		return w.errorf(n, "YAML aliases (*%s) are not supported in a gate file; repeat the value instead", nodeText(n.Value))
	case *ast.MergeKeyNode:
		return w.errorf(n, "YAML merge keys (<<) are not supported in a gate file; write the keys out")
	case *ast.TagNode:
		return w.errorf(n, "YAML tags (%s) are not supported in a gate file; quote a value to make it a string", n.Start.Value)
	case *ast.MappingNode:
		for _, mv := range n.Values {
			if err := w.refuseExtensions(mv); err != nil {
				return err
			}
		}
	case *ast.MappingValueNode:
		if err := w.refuseExtensions(n.Key); err != nil {
			return err
		}
		return w.refuseExtensions(n.Value)
	case *ast.MappingKeyNode:
		return w.refuseExtensions(n.Value)
	case *ast.SequenceNode:
		for _, v := range n.Values {
			if err := w.refuseExtensions(v); err != nil {
				return err
			}
		}
	}
	return nil
}

// nodeText is a node's source text for messages, "" for nil.
func nodeText(n ast.Node) string {
	if n == nil {
		return ""
	}
	if tk := n.GetToken(); tk != nil {
		return tk.Value
	}
	return fmt.Sprint(n)
}
