package server

import "strconv"

// fmtIndex is "name[i]", for field paths inside repeated fields.
func fmtIndex(name string, i int) string { return name + "[" + strconv.Itoa(i) + "]" }

// quote is a Go-quoted string, safe to put in an error message.
func quote(s string) string { return strconv.Quote(s) }
