package rules

import (
	"fmt"
	"time"
)

// This file holds where rules come from: a position in a file, or an xDS
// resource, and when a Set was built (for /debug/config and `floodgate
// config explain`).

// Source is where a rule was defined: a position in a file, or, for rules
// an xDS management server sent, the resource and its version (positions in
// the document a resource is converted to mean nothing to an operator).
// Exactly one of File and XDSResource is set on a loaded rule.
type Source struct {
	// File is the config file's path (or the name given to Parse).
	File string `json:"file,omitempty"`
	// Line and Column are 1-based positions in File.
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
	// XDSResource is the name of the xDS resource that defined the rule.
	XDSResource string `json:"xds_resource,omitempty"`
	// Version is the xDS version_info of the response that carried it.
	Version string `json:"version,omitempty"`
}

// String is "file:line:column", or "xds resource NAME (version V)".
func (s Source) String() string {
	if s.XDSResource != "" {
		return fmt.Sprintf("xds resource %q (version %q)", s.XDSResource, s.Version)
	}
	return fmt.Sprintf("%s:%d:%d", s.File, s.Line, s.Column)
}

// origin is where a file's rules came from: the file, or an xDS resource.
// Every srcRef of one file shares it.
type origin struct{ file, xdsResource, version string }

// srcRef is a Source as a rule keeps it: 16 bytes per limit and per
// descriptor (a 200,000-line ban list has as many of each), not the 64 of
// a Source.
type srcRef struct {
	o         *origin
	line, col int32
}

// source is the Source r stands for; an xDS rule has no position.
func (r srcRef) source() Source {
	switch {
	case r.o == nil:
		return Source{}
	case r.o.xdsResource != "":
		return Source{XDSResource: r.o.xdsResource, Version: r.o.version}
	}
	return Source{File: r.o.file, Line: int(r.line), Column: int(r.col)}
}

// ref is the srcRef of a position in the file being parsed.
func (p *parser) ref(at pos) srcRef {
	return srcRef{o: p.origin, line: int32(min(at.line, 1<<31-1)), col: int32(min(at.col, 1<<31-1))}
}

// sourceAt is the Source of a position in the file being parsed.
func (p *parser) sourceAt(at pos) Source { return p.ref(at).source() }

// Source is where l's rate_limit was written (its mapping's first key,
// or the brace of a flow mapping), or the xDS resource that sent it.
func (l *Limit) Source() Source { return l.src.source() }

// LoadedAt is when c was built (read and validated), for operators asking
// which rules are live. Zero for a nil Set.
func (c *Set) LoadedAt() time.Time {
	if c == nil {
		return time.Time{}
	}
	return c.loadedAt
}

// PolicySource is where the named policy was defined; zero when there is
// no such policy.
func (c *Set) PolicySource(name string) Source {
	if c == nil {
		return Source{}
	}
	return c.policyAt[name]
}

// ParseXDS is Parse for the YAML document an xDS resource stands for: its
// errors are named name, and every rule's Source (limits, quota buckets,
// policies) is the resource and version instead of a position in the
// generated document.
func ParseXDS(name, resource, version string, data []byte) (*Set, error) {
	return build([]source{{name: name, data: data, resource: resource, version: version}}, Options{})
}
