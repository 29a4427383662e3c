package simulate

import (
	"strings"
	"time"
)

// ShortDuration writes d for people to read (the reports here, and the
// CLI's answers): as time.Duration.String does, without zero tails, 1m
// rather than 1m0s, 2h rather than 2h0m0s. Unlike a period written in its
// largest whole unit, 90s is 1m30s.
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
