package rules

import (
	"fmt"
	"time"
)

// This file holds where rules come from: a position in a file, or an xDS
// resource, and when a Config was built (for /debug/config and `floodgate
// config explain`).

// Source is where a rule was defined: a position in a file, or, for rules
// an xDS management server sent, the resource and its version (positions in
// the document a resource is converted to mean nothing to an operator).
// Exactly one of File and XDSResource is set on a loaded rule.
type Source struct {
	// File is the config file's path (or the name given to Parse).
	File string
	// Line and Column are 1-based positions in File.
	Line, Column int
	// XDSResource is the name of the xDS resource that defined the rule.
	XDSResource string
	// Version is the xDS version_info of the response that carried it.
	Version string
}

// String is "file:line:column", or "xds resource NAME (version V)".
func (s Source) String() string {
	if s.XDSResource != "" {
		return fmt.Sprintf("xds resource %q (version %q)", s.XDSResource, s.Version)
	}
	return fmt.Sprintf("%s:%d:%d", s.File, s.Line, s.Column)
}

// sourceAt is the Source of a position in the file being parsed.
func (p *parser) sourceAt(at pos) Source {
	return Source{File: p.file, Line: at.line, Column: at.col}
}

// LoadedAt is when c was built (read and validated), for operators asking
// which rules are live. Zero for a nil Config.
func (c *Config) LoadedAt() time.Time {
	if c == nil {
		return time.Time{}
	}
	return c.loadedAt
}

// PolicySource is where the named policy was defined; zero when there is
// no such policy.
func (c *Config) PolicySource(name string) Source {
	if c == nil {
		return Source{}
	}
	return c.policyAt[name]
}

// ParseXDS is Parse for the YAML document an xDS resource stands for: its
// errors are named name, and every rule's Source (limits, quota buckets,
// policies) is the resource and version instead of a position in the
// generated document.
func ParseXDS(name, resource, version string, data []byte) (*Config, error) {
	c, err := Parse(name, data)
	if err != nil {
		return nil, err
	}
	src := Source{XDSResource: resource, Version: version}
	for _, root := range c.domains {
		walkNodes(root, func(n *node) {
			n.src = src
			for _, l := range n.limits {
				l.Source = src
			}
		})
	}
	for _, dq := range c.quota {
		for _, q := range dq.buckets {
			q.Source = src
			if q.Limit != nil {
				q.Limit.Source = src
			}
		}
	}
	for name := range c.policyAt {
		c.policyAt[name] = src
	}
	return c, nil
}

// walkNodes calls f on n and every node below it.
func walkNodes(n *node, f func(*node)) {
	f(n)
	for _, c := range n.exact {
		walkNodes(c, f)
	}
	for _, c := range n.keyOnly {
		walkNodes(c, f)
	}
}
