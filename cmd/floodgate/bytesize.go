package main

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// byteUnits are the units a byte size may carry, matched without regard
// to case: decimal (KB = 1000) and binary (KiB = 1024).
var byteUnits = map[string]int64{
	"b":   1,
	"kb":  1000,
	"mb":  1000 * 1000,
	"gb":  1000 * 1000 * 1000,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
}

// errByteSize is what a byte-size flag's Set returns for a value of
// another form; the flag parser puts the flag and the value before it.
var errByteSize = errors.New("want a size in bytes: a whole number, optionally with a unit KB, MB, GB (decimal) or KiB, MiB, GiB (binary), such as 1000000, 64MB or 256MiB")

// errByteSizeRange is Set's error for a size too large for its flag.
var errByteSizeRange = errors.New("out of range for a size in bytes")

// parseByteSize reads s as a size in bytes: an integer (negative ones
// too, for the range checks after parsing to refuse with their own
// message), or a whole number followed by a unit of byteUnits.
func parseByteSize(s string) (int64, error) {
	num := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	unit := strings.ToLower(strings.TrimSpace(s[len(num):]))
	mult := int64(1)
	if unit != "" {
		m, ok := byteUnits[unit]
		if !ok {
			return 0, errByteSize
		}
		mult = m
	}
	n, err := strconv.ParseInt(num, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, errByteSizeRange
	case err != nil, unit != "" && n < 0:
		return 0, errByteSize
	case n > math.MaxInt64/mult:
		return 0, errByteSizeRange
	}
	return n * mult, nil
}

// byteSize is a pflag.Value for a byte-size flag whose variable is an
// integer.
type byteSize[T int | int64 | uint32] struct{ p *T }

// byteSizeVar defines a byte-size flag: like fs.Int64Var and its kin, but
// its value may carry a unit (see parseByteSize).
func byteSizeVar[T int | int64 | uint32](fs *pflag.FlagSet, p *T, name string, value T, usage string) {
	*p = value
	fs.Var(byteSize[T]{p}, name, usage)
}

func (b byteSize[T]) String() string {
	if b.p == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*b.p), 10)
}

// Type is the flag's type in --help: a size, such as 256MiB.
func (byteSize[T]) Type() string { return "size" }

func (b byteSize[T]) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	if int64(T(n)) != n { // negative or past a uint32, or past an int on a 32-bit platform
		return errByteSizeRange
	}
	*b.p = T(n)
	return nil
}
