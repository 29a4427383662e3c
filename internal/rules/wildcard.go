package rules

import "strings"

// pattern is a descriptor value holding '*' wildcards, as envoyproxy/
// ratelimit reads them: each '*' stands for any run of characters, none
// included, '/' included; there is no escape, so a value with a '*' is
// always a pattern. "foo*" is a prefix, "*.pdf" a suffix, "/api/*/items"
// both, and "svc*ep*rpc" asks for its parts in that order.
type pattern struct {
	prefix, suffix string
	middle         []string // the non-empty parts between the first and last '*', in order
	minLen         int      // the bytes a match needs at least
}

// isWildcard reports whether a configured value is a pattern.
func isWildcard(value string) bool { return strings.Contains(value, "*") }

// compilePattern splits a value with at least one '*' at its wildcards.
func compilePattern(value string) pattern {
	parts := strings.Split(value, "*")
	p := pattern{prefix: parts[0], suffix: parts[len(parts)-1]}
	for _, m := range parts[1 : len(parts)-1] {
		if m != "" {
			p.middle = append(p.middle, m)
		}
	}
	p.minLen = len(value) - strings.Count(value, "*")
	return p
}

// match reports whether s matches the pattern. It does not allocate and
// runs in time linear in len(s) times the number of parts: after the
// prefix and suffix are cut off, taking each middle part at its leftmost
// place is never worse than any later one, so no backtracking is needed.
func (p *pattern) match(s string) bool {
	if len(s) < p.minLen || !strings.HasPrefix(s, p.prefix) || !strings.HasSuffix(s, p.suffix) {
		return false
	}
	s = s[len(p.prefix) : len(s)-len(p.suffix)]
	for _, m := range p.middle {
		i := strings.Index(s, m)
		if i < 0 {
			return false
		}
		s = s[i+len(m):]
	}
	return true
}
