package rules

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	goyaml "github.com/goccy/go-yaml"
	goyamlparser "github.com/goccy/go-yaml/parser"
	"go.yaml.in/yaml/v3"
)

// This file reads YAML nodes into Go values, reporting every node of the
// wrong shape (a list where a mapping belongs, an unknown key, "yes please"
// for a boolean) at its line and column. What the values mean is checked
// elsewhere (validate_*.go), on the typed documents of yamlnodes.go.

// Bounds that keep a hostile or broken file from exhausting memory.
const (
	// maxDepth bounds descriptor nesting (a request has at most this many
	// entries that can match).
	maxDepth = 32
	// maxAliased bounds the YAML nodes visited per file beyond the
	// document's own nodes: what anchors and aliases may expand to.
	maxAliased = 100_000
	// maxErrors bounds the errors reported per file.
	maxErrors = 50
)

// pos is a position in a file.
type pos struct{ line, col int }

func posOf(n *yaml.Node) pos { return pos{n.Line, n.Column} }

// value is one decoded scalar and the node it was written as. at is the
// node as it appears under its key (an alias stays the alias, so an error
// about the value points where the file uses it); nil when the key is
// absent. ok is false when the key is absent or the node did not decode
// (the decoder has then reported why).
type value[T any] struct {
	v  T
	at *yaml.Node
	ok bool
}

// given reports whether the key was present, decoded or not.
func (v value[T]) given() bool { return v.at != nil }

// isTrue reports whether a boolean was given and decoded as true.
func isTrue(v value[bool]) bool { return v.ok && v.v }

// decoder reads one file's YAML tree, collecting every problem it finds.
type decoder struct {
	file    string
	errs    ErrorList
	visited int
	budget  int // visits allowed: the document's nodes plus maxAliased
	tooBig  bool
	active  map[*yaml.Node]bool // descriptor lists being read, to catch alias cycles
}

func (d *decoder) errorAt(at pos, format string, args ...any) {
	if len(d.errs) < maxErrors {
		d.errs = append(d.errs, &Error{File: d.file, Line: at.line, Column: at.col, Msg: fmt.Sprintf(format, args...)})
	}
}

func (d *decoder) errorf(n *yaml.Node, format string, args ...any) {
	d.errorAt(posOf(n), format, args...)
}

// sortByPosition puts the errors of one file in file order (those without
// a position first), keeping the order they were found in at one position.
func (l ErrorList) sortByPosition() {
	slices.SortStableFunc(l, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
}

// yamlLine pulls the line out of yaml's syntax errors ("yaml: line 3: ...").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError reports err, the YAML library's syntax error in data. That
// library names a line only; a second parser, which names the line and
// column of the token at fault, places the error when it finds one too.
func (d *decoder) yamlError(data []byte, err error) {
	_, perr := goyamlparser.ParseBytes(data, 0)
	if syn, ok := errors.AsType[*goyaml.SyntaxError](perr); ok && syn.Token != nil && syn.Token.Position != nil {
		d.errorAt(pos{line: syn.Token.Position.Line, col: syn.Token.Position.Column}, "YAML syntax: %s", syn.Message)
		return
	}
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		d.errorAt(pos{line: line}, "YAML syntax: %s", m[2])
		return
	}
	d.errorAt(pos{}, "YAML syntax: %s", strings.TrimPrefix(msg, "yaml: "))
}

// document reads the file's single YAML document and returns its root
// node, or nil after reporting why there is none. It sets the alias
// budget from the document's size.
func (d *decoder) document(data []byte) *yaml.Node {
	doc, extra, err := decodeYAML(data)
	switch {
	case errors.Is(err, io.EOF):
		d.errorAt(pos{}, "empty file: want a domain with descriptors, or policies")
		return nil
	case err != nil:
		d.yamlError(data, err)
		return nil
	case extra != nil:
		d.errorf(extra, "a second YAML document: put one domain in each file")
		return nil
	}
	d.budget = countNodes(doc) + maxAliased
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			d.errorAt(pos{}, "empty file: want a domain with descriptors, or policies")
			return nil
		}
		return doc.Content[0]
	}
	return doc
}

// decodeYAML reads the file's YAML documents: the first, and whether
// there is a second. The YAML library is not trusted to never panic on
// malformed input; a panic becomes an error.
func decodeYAML(data []byte) (doc *yaml.Node, extra *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			doc, extra, err = nil, nil, fmt.Errorf("yaml: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first yaml.Node
	if err := dec.Decode(&first); err != nil {
		return nil, nil, err
	}
	var second yaml.Node
	if err := dec.Decode(&second); err == nil {
		return &first, &second, nil
	} else if !errors.Is(err, io.EOF) {
		return &first, nil, err
	}
	return &first, nil, nil
}

// visit counts n against the per-file budget and follows aliases. It
// returns nil when n is nil (a key that is absent) or the budget is spent.
func (d *decoder) visit(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	n = deref(n)
	d.visited++
	if d.visited > d.budget || n == nil || n.Kind == yaml.AliasNode {
		if !d.tooBig {
			d.tooBig = true
			d.errorAt(pos{}, "aliases expand too far (more than %d YAML nodes beyond the file's own)", maxAliased)
		}
		return nil
	}
	return n
}

// deref follows aliases without counting: for a node that visit has
// already counted (each place in the file counts once).
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// countNodes counts the document's nodes without following aliases.
func countNodes(n *yaml.Node) int {
	count := 0
	stack := []*yaml.Node{n}
	for len(stack) > 0 {
		n, stack = stack[len(stack)-1], stack[:len(stack)-1]
		count++
		stack = append(stack, n.Content...)
	}
	return count
}

// fields reads a mapping whose keys must be among allowed, reporting
// unknown and duplicate keys. It returns the values by key and the
// mapping itself (aliases followed).
func (d *decoder) fields(n *yaml.Node, what string, allowed ...string) (map[string]*yaml.Node, *yaml.Node, bool) {
	if n = d.visit(n); n == nil {
		return nil, nil, false
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, "%s must be a mapping, got %s", what, kindName(n))
		return nil, nil, false
	}
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	keys := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k = d.visit(k); k == nil {
			return nil, nil, false
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, "%s: keys must be plain names, got %s", what, kindName(k))
			continue
		}
		if first := keys[k.Value]; first != nil {
			d.errorf(k, "duplicate key %q in %s (first at line %d)", k.Value, what, first.Line)
			continue
		}
		keys[k.Value] = k
		if !slices.Contains(allowed, k.Value) {
			d.errorf(k, "unknown key %q in %s (want one of %s)", k.Value, what, strings.Join(allowed, ", "))
			continue
		}
		out[k.Value] = v
	}
	return out, n, true
}

// pair is one key and value of a free-form mapping.
type pair struct{ key, value *yaml.Node }

// pairs reads a mapping of any keys (a policy name, a bucket_id key);
// with nullOK, a null (the key with nothing after it) is an empty mapping.
// mustBe is the error for anything else. It returns the mapping itself
// (aliases followed).
func (d *decoder) pairs(n *yaml.Node, nullOK bool, mustBe string) ([]pair, *yaml.Node, bool) {
	if n = d.visit(n); n == nil {
		return nil, nil, false
	}
	switch {
	case nullOK && n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		return nil, n, true
	case n.Kind != yaml.MappingNode:
		d.errorf(n, "%s, got %s", mustBe, kindName(n))
		return nil, nil, false
	}
	out := make([]pair, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := d.visit(n.Content[i])
		if k == nil {
			return nil, nil, false
		}
		out = append(out, pair{k, n.Content[i+1]})
	}
	return out, n, true
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

// str reads a scalar as text, as envoyproxy/ratelimit's YAML library does
// (value: 123 is the string "123"; an empty value is "").
func (d *decoder) str(n *yaml.Node) value[string] {
	out := value[string]{at: n}
	if n = d.visit(n); n == nil {
		return out
	}
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, "want a string, got %s", kindName(n))
		return out
	}
	if n.Tag != "!!null" {
		out.v = n.Value
	}
	out.ok = true
	return out
}

// boolean reads a YAML boolean.
func (d *decoder) boolean(n *yaml.Node, name string) value[bool] {
	return tagged[bool](d, n, "!!bool", name, "true or false")
}

// integer reads a YAML integer.
func (d *decoder) integer(n *yaml.Node, name string) value[int64] {
	return tagged[int64](d, n, "!!int", name, "an integer")
}

// tagged reads a scalar of the YAML tag tag into a T; want says in the
// error what the field called name must be.
func tagged[T any](d *decoder, n *yaml.Node, tag, name, want string) value[T] {
	out := value[T]{at: n}
	if n = d.visit(n); n == nil {
		return out
	}
	var v T // declared here: Decode moves it to the heap
	if n.Kind != yaml.ScalarNode || n.Tag != tag || n.Decode(&v) != nil {
		d.errorf(n, "%s must be %s, got %s", name, want, kindName(n))
		return out
	}
	out.v, out.ok = v, true
	return out
}

// duration reads a Go duration of whole milliseconds ("1500ms", "15m").
func (d *decoder) duration(n *yaml.Node, name string) value[time.Duration] {
	out := value[time.Duration]{at: n}
	if n = d.visit(n); n == nil {
		return out
	}
	v, err := time.ParseDuration(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil {
		d.errorf(n, "%s must be a duration such as \"1s\", \"15m\" or \"1500ms\", got %s", name, kindName(n))
		return out
	}
	if v <= 0 || v%time.Millisecond != 0 {
		d.errorf(n, "%s must be a positive whole number of milliseconds, got %v", name, v)
		return out
	}
	out.v, out.ok = v, true
	return out
}

// list reads a list's items; a null (the key with nothing after it) is
// an empty list.
func (d *decoder) list(n *yaml.Node, name string) ([]*yaml.Node, bool) {
	if n = d.visit(n); n == nil {
		return nil, false
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, true // "descriptors:" with nothing under it
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, "%s must be a list, got %s", name, kindName(n))
		return nil, false
	}
	return n.Content, true
}
