// Package zones resolves the IANA time zone names of calendar limits
// (algorithms.Limit.Location): once, at config load or request validation,
// since reading a zone parses its file on every call. Every zone comes
// from the database embedded in the binary, never the host's, so that
// replicas sharing a store agree on every calendar boundary.
package zones

import (
	"fmt"
	"regexp"
	"sync"
	"time"
)

// Load resolves an IANA time zone name such as "Asia/Jakarta"; "" and
// "UTC" are UTC. It refuses "Local", names not spelled as IANA names
// (hostDependent) and names the database does not hold, with an error
// saying "unknown time zone".
func Load(name string) (*time.Location, error) {
	if len(name) > MaxNameLen {
		return nil, fmt.Errorf("unknown time zone: a name of %d bytes (IANA names are at most %d)", len(name), MaxNameLen)
	}
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, fmt.Errorf("unknown time zone %q: name an IANA zone such as \"Europe/Berlin\", not the server's local zone", name)
	}
	if hostDependent(name) {
		return nil, fmt.Errorf("unknown time zone %q: not an IANA zone name but a file of this host's zone directory, whose meaning differs between hosts; name an IANA zone such as \"Europe/Berlin\"", name)
	}
	loc, err := loadEmbedded(name) // never the host's database: see database
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q (want an IANA name such as \"Asia/Jakarta\" or \"America/New_York\")", name)
	}
	return loc, nil
}

// ianaName is how IANA zone names are spelled: '/'-separated parts, each
// an upper-case letter then letters, digits, '_', '+' or '-'.
var ianaName = regexp.MustCompile(`^[A-Z][A-Za-z0-9_+-]*(/[A-Z][A-Za-z0-9_+-]*)*$`)

// hostDependent reports whether name is not spelled as an IANA zone name,
// so could only be a file of one host's zone directory ("localtime",
// "posix/UTC", "./UTC"), or is the placeholder "Factory".
func hostDependent(name string) bool { return name == "Factory" || !ianaName.MatchString(name) }

// MaxNameLen bounds a zone name (the longest IANA name is 32 bytes), so a
// Cache never holds, nor an error echoes, a caller's megabyte.
const MaxNameLen = 64

// MaxCached bounds a Cache; every real zone fits.
const MaxCached = 1024

// Cache is Load with memory (unknown names too), for limits that arrive
// with every request. The zero value is ready and safe for concurrent use.
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
