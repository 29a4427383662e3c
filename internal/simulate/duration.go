package simulate

import (
	"strings"
	"time"
)

// ShortDuration writes d as time.Duration.String does, without zero
// tails: 1m, 2h, 1m30s.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
