package xdsrules

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/floodgate/floodgate/internal/rules"
)

// Live is the rules the APIs see: the config files' and the xDS
// management server's, merged. Either source replaces its part, and the
// merged whole is swapped in at once; a change that would define a domain
// twice is refused and the previous rules keep serving. A refused part is
// kept and tried again whenever the other source changes, in both
// directions: a domain moving from the files to xDS (xDS adds it while a
// file still defines it, then the file drops it) applies once the file
// drops it, without waiting for the management server to resend.
type Live struct {
	cur atomic.Pointer[rules.Set]

	mu          sync.Mutex
	file        *rules.Set   // the files' part in force
	pendingFile *rules.Set   // a files' reload refused for a clash, retried when xDS changes
	xds         []*rules.Set // the xDS part in force, one per resource
	pendingXDS  []*rules.Set // an xDS response refused for a clash, retried when the files change
	changed     func()       // after every swap; nil: none
}

// NewLive returns Live rules with neither part yet (Current is nil);
// changed, if not nil, is called after every swap.
func NewLive(changed func()) *Live { return &Live{changed: changed} }

// Current returns the merged rules in force. It never blocks.
func (l *Live) Current() *rules.Set { return l.cur.Load() }

// SetFile makes c the files' part. An xDS response refused earlier for a
// clash is then tried again; retried reports whether it now applies.
func (l *Live) SetFile(c *rules.Set) (retried bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.swap(c, l.xds); err != nil {
		l.pendingFile = c
		return false, err
	}
	l.file, l.pendingFile = c, nil
	if p := l.pendingXDS; p != nil && l.swap(c, p) == nil {
		l.xds, l.pendingXDS = p, nil
		retried = true
	}
	return retried, nil
}

// SetXDS makes parts the xDS part. A files' reload refused earlier for a
// clash is then tried again; retried reports whether it now applies. A
// refusal is a *Refusal whose message, sent to the management
// server, names the resources and domains but no local file.
func (l *Live) SetXDS(parts []*rules.Set) (retried bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.swap(l.file, parts); err != nil {
		l.pendingXDS = parts
		return false, &Refusal{Message: clashes(l.file, parts), Err: err}
	}
	l.xds, l.pendingXDS = parts, nil
	if p := l.pendingFile; p != nil && l.swap(p, parts) == nil {
		l.file, l.pendingFile = p, nil
		retried = true
	}
	return retried, nil
}

// clashes names, for the management server, the domains of the xDS parts
// that the files define too: the resource and the domain, never a path
// of this host's.
func clashes(file *rules.Set, parts []*rules.Set) string {
	local := file.Domains()
	var out []string
	for _, p := range parts {
		for _, d := range p.Domains() {
			if slices.Contains(local, d) {
				out = append(out, fmt.Sprintf("%s: domain %q is defined by this server's local config files too", strings.Join(p.Files(), ", "), d))
			}
		}
	}
	if len(out) == 0 {
		return "refused: the resources clash with this server's local config"
	}
	return strings.Join(out, "; ")
}

// swap merges the two parts and makes the result current. l.mu is held.
func (l *Live) swap(file *rules.Set, xds []*rules.Set) error {
	merged, err := rules.Merge(append([]*rules.Set{file}, xds...)...)
	if err != nil {
		return err
	}
	l.cur.Store(merged)
	if l.changed != nil {
		l.changed()
	}
	return nil
}
