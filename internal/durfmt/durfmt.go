// Package durfmt writes durations for people to read.
package durfmt

import (
	"strings"
	"time"
)

// Short writes d as time.Duration.String does, without zero tails: 1m
// rather than 1m0s, 2h rather than 2h0m0s. Unlike a period written in its
// largest whole unit, 90s is 1m30s.
func Short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
