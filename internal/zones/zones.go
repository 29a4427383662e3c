// Package zones resolves the IANA time zone names of calendar limits
// (algorithms.Limit.Location): once, at config load or request validation,
// since time.LoadLocation reads and parses the zone database on every call.
package zones

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrUnknown is wrapped by every error Load returns.
var ErrUnknown = errors.New("unknown time zone")

// Load resolves an IANA time zone name such as "Asia/Jakarta"; "" and
// "UTC" are UTC. It refuses "Local" (the server's own zone, which no
// caller means) and every name the zone database does not hold, with an
// error wrapping ErrUnknown that names the zone.
func Load(name string) (*time.Location, error) {
	if len(name) > MaxNameLen {
		return nil, fmt.Errorf("%w: a name of %d bytes (IANA names are at most %d)", ErrUnknown, len(name), MaxNameLen)
	}
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, fmt.Errorf("%w %q: name an IANA zone such as \"Europe/Berlin\", not the server's local zone", ErrUnknown, name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w %q (want an IANA name such as \"Asia/Jakarta\" or \"America/New_York\")", ErrUnknown, name)
	}
	return loc, nil
}

// MaxNameLen bounds a zone name: the longest IANA name is 32 bytes
// ("America/Argentina/ComodRivadavia"). Longer names are refused unread,
// so a Cache never holds (nor an error echoes) a caller's megabyte.
const MaxNameLen = 64

// MaxCached bounds a Cache: the zone database holds about 600 names, so
// every real zone fits; names beyond it (a caller sending junk) are
// resolved without being kept.
const MaxCached = 1024

// Cache is Load with memory, for limits that arrive with every request
// (the Check API's inline limits). The zero value is ready to use and
// safe for concurrent use. Unknown names are remembered too, so a caller
// repeating one costs no zone database lookup.
type Cache struct {
	mu sync.RWMutex
	m  map[string]cached
}

type cached struct {
	loc *time.Location
	err error
}

// Load is the package's Load, remembered.
func (c *Cache) Load(name string) (*time.Location, error) {
	c.mu.RLock()
	e, ok := c.m[name]
	c.mu.RUnlock()
	if ok {
		return e.loc, e.err
	}
	loc, err := Load(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cached{}
	}
	if len(c.m) < MaxCached {
		c.m[name] = cached{loc, err}
	}
	return loc, err
}
