package rules

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is wrapped by every error that means the configuration itself
// is wrong (as opposed to a file that could not be read).
var ErrInvalid = errors.New("invalid config")

// Error is one problem in one file, at a position when it has one.
type Error struct {
	// File is the file's path (or the name given to Parse).
	File string
	// Line and Column are 1-based; 0 means unknown.
	Line, Column int
	// Msg says what is wrong.
	Msg string
}

// Error formats e as "file:line:column: msg", leaving out what is unknown.
func (e *Error) Error() string {
	switch {
	case e.Line == 0:
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	case e.Column == 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// ErrorList is every problem found, in file order. Load and Parse return
// one (as an error) when the input is invalid; each line of its message is
// one Error.
type ErrorList []*Error

// Error joins the errors, one per line.
func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap returns the errors, so errors.As finds the first *Error and
// errors.Is finds ErrInvalid.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}
