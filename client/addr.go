package client

import (
	"net/netip"
	"strings"
)

// parseHostAddr reads an IP address written as "ip", "ip:port", "[ipv6]"
// or "[ipv6]:port" (zones allowed), as proxies write X-Forwarded-For
// entries and Go writes remote addresses. ok is false for anything else
// (a host name, "unknown", garbage), which must never become a key of its
// own: the caller falls back to an address it can trust.
func parseHostAddr(s string) (addr netip.Addr, ok bool) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr(), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	return a, err == nil
}

// addrKey is addr as a key: IPv4-mapped IPv6 as IPv4, no zone, and IPv6
// cut to its first v6Bits bits ("2001:db8:1:2::/64"), since one subscriber
// usually holds a whole /64 and can rotate through it.
func addrKey(addr netip.Addr, v6Bits int) string {
	addr = addr.Unmap().WithZone("")
	if addr.Is6() && v6Bits > 0 && v6Bits < 128 {
		if p, err := addr.Prefix(v6Bits); err == nil {
			return p.String()
		}
	}
	return addr.String()
}
