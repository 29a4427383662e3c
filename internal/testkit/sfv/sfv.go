// Package sfv is a strict parser of HTTP Structured Field Values (RFC
// 9651) for tests: it checks that the rate-limit headers floodgate writes
// are valid Lists and Items, and reads their members and parameters back.
// It follows the parsing algorithms of RFC 9651 section 4.2 for Lists,
// Items, Inner Lists and Parameters, with the bare item types Integer,
// Decimal, String, Token, Byte Sequence and Boolean; a Date or a Display
// String is rejected as unsupported. Anything the RFC rejects is an error.
package sfv

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Token is a bare Token item, told apart from a String.
type Token string

// Param is one parameter of an item.
type Param struct {
	Key   string
	Value any // int64, float64, string, Token, []byte or bool
}

// Item is a bare item with its parameters. Inner lists are Items whose
// Value is []Item.
type Item struct {
	Value  any // int64, float64, string, Token, []byte, bool or []Item
	Params []Param
}

// ParseList parses a List field value.
func ParseList(s string) ([]Item, error) {
	p := &parser{s: s}
	p.skipSP()
	var out []Item
	for !p.done() {
		it, err := p.member()
		if err != nil {
			return nil, err
		}
		out = append(out, it)
		p.skipOWS()
		if p.done() {
			return out, nil
		}
		if p.s[p.i] != ',' {
			return nil, p.errf("expected ',' after a list member")
		}
		p.i++
		p.skipOWS()
		if p.done() {
			return nil, p.errf("trailing ',' in a list")
		}
	}
	return out, nil
}

// ParseItem parses an Item field value.
func ParseItem(s string) (Item, error) {
	p := &parser{s: s}
	p.skipSP()
	it, err := p.item()
	if err != nil {
		return Item{}, err
	}
	p.skipSP()
	if !p.done() {
		return Item{}, p.errf("trailing characters after an item")
	}
	return it, nil
}

type parser struct {
	s string
	i int
}

func (p *parser) done() bool { return p.i >= len(p.s) }

func (p *parser) errf(format string, args ...any) error {
	return fmt.Errorf("structured field %q at byte %d: %s", p.s, p.i, fmt.Sprintf(format, args...))
}

func (p *parser) skipSP() {
	for !p.done() && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *parser) skipOWS() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *parser) member() (Item, error) {
	if !p.done() && p.s[p.i] == '(' {
		return p.innerList()
	}
	return p.item()
}

func (p *parser) innerList() (Item, error) {
	p.i++ // '('
	var items []Item
	for !p.done() {
		p.skipSP()
		if !p.done() && p.s[p.i] == ')' {
			p.i++
			params, err := p.params()
			if err != nil {
				return Item{}, err
			}
			return Item{Value: items, Params: params}, nil
		}
		it, err := p.item()
		if err != nil {
			return Item{}, err
		}
		items = append(items, it)
		if p.done() || (p.s[p.i] != ' ' && p.s[p.i] != ')') {
			return Item{}, p.errf("expected ' ' or ')' in an inner list")
		}
	}
	return Item{}, p.errf("unterminated inner list")
}

func (p *parser) item() (Item, error) {
	v, err := p.bareItem()
	if err != nil {
		return Item{}, err
	}
	params, err := p.params()
	if err != nil {
		return Item{}, err
	}
	return Item{Value: v, Params: params}, nil
}

func (p *parser) params() ([]Param, error) {
	var out []Param
	for !p.done() && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		k, err := p.key()
		if err != nil {
			return nil, err
		}
		var v any = true
		if !p.done() && p.s[p.i] == '=' {
			p.i++
			if v, err = p.bareItem(); err != nil {
				return nil, err
			}
		}
		replaced := false
		for j := range out {
			if out[j].Key == k { // a later parameter of the same key wins
				out[j].Value, replaced = v, true
			}
		}
		if !replaced {
			out = append(out, Param{k, v})
		}
	}
	return out, nil
}

func (p *parser) key() (string, error) {
	if p.done() || !(p.s[p.i] == '*' || (p.s[p.i] >= 'a' && p.s[p.i] <= 'z')) {
		return "", p.errf("a key must start with a lower-case letter or '*'")
	}
	start := p.i
	for !p.done() {
		c := p.s[p.i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.i++
	}
	return p.s[start:p.i], nil
}

func (p *parser) bareItem() (any, error) {
	if p.done() {
		return nil, p.errf("expected an item")
	}
	switch c := p.s[p.i]; {
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == '"':
		return p.str()
	case c == '*' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
		return p.token(), nil
	case c == ':':
		return p.bytes()
	case c == '?':
		return p.boolean()
	case c == '@' || c == '%':
		return nil, p.errf("dates and display strings are not supported")
	}
	return nil, p.errf("unexpected %q starting an item", p.s[p.i])
}

func (p *parser) number() (any, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	if p.done() || p.s[p.i] < '0' || p.s[p.i] > '9' {
		return nil, p.errf("expected a digit")
	}
	digits, dot, intDigits := 0, false, 0
	for !p.done() {
		c := p.s[p.i]
		if c >= '0' && c <= '9' {
			digits++
		} else if c == '.' && !dot {
			if digits > 12 {
				return nil, p.errf("more than 12 integer digits in a decimal")
			}
			dot, intDigits = true, digits
		} else {
			break
		}
		p.i++
		if !dot && digits > 15 {
			return nil, p.errf("more than 15 digits in an integer")
		}
		if dot && digits > 15 {
			return nil, p.errf("more than 15 digits in a decimal")
		}
	}
	num := p.s[start:p.i]
	if !dot {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return nil, p.errf("integer %q: %v", num, err)
		}
		return n, nil
	}
	if num[len(num)-1] == '.' {
		return nil, p.errf("a decimal must not end in '.'")
	}
	if digits-intDigits > 3 {
		return nil, p.errf("more than 3 fractional digits in a decimal")
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return nil, p.errf("decimal %q: %v", num, err)
	}
	return f, nil
}

func (p *parser) str() (string, error) {
	p.i++ // '"'
	var b strings.Builder
	for !p.done() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.done() {
				return "", p.errf("a string ends in '\\'")
			}
			e := p.s[p.i]
			if e != '"' && e != '\\' {
				return "", p.errf("invalid escape \\%c in a string", e)
			}
			b.WriteByte(e)
			p.i++
		case c == '"':
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", p.errf("byte %#x is not allowed in a string", c)
		default:
			b.WriteByte(c)
		}
	}
	return "", p.errf("unterminated string")
}

func (p *parser) token() Token {
	start := p.i
	p.i++
	for !p.done() {
		c := p.s[p.i]
		if !(isTchar(c) || c == ':' || c == '/') {
			break
		}
		p.i++
	}
	return Token(p.s[start:p.i])
}

// isTchar is RFC 9110's tchar.
func isTchar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func (p *parser) bytes() ([]byte, error) {
	p.i++ // ':'
	end := strings.IndexByte(p.s[p.i:], ':')
	if end < 0 {
		return nil, p.errf("unterminated byte sequence")
	}
	b, err := base64.StdEncoding.DecodeString(p.s[p.i : p.i+end])
	if err != nil {
		return nil, p.errf("byte sequence: %v", err)
	}
	p.i += end + 1
	return b, nil
}

func (p *parser) boolean() (bool, error) {
	p.i++ // '?'
	if p.done() {
		return false, errors.New("structured field: '?' without 0 or 1")
	}
	c := p.s[p.i]
	p.i++
	switch c {
	case '0':
		return false, nil
	case '1':
		return true, nil
	}
	return false, p.errf("a boolean is ?0 or ?1")
}
