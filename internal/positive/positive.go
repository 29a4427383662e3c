// Package positive fills settings whose zero (or negative) value means
// "the default".
package positive

// Number is a type Or accepts: the integers, durations and floats of
// settings.
type Number interface {
	~int | ~int32 | ~int64 | ~uint32 | ~float64
}

// Or is v, or def when v is not positive.
func Or[T Number](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
