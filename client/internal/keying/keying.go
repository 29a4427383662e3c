// Package keying turns what the HTTP middleware and the gRPC interceptors
// know about a caller (its address, a secret it sent) into rate-limit
// keys, the same way in both.
package keying

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/netip"
	"strings"
)

// DefaultIPv6Prefix is how many leading bits of an IPv6 address name one
// client: a subscriber usually holds a whole /64 and can rotate through it.
const DefaultIPv6Prefix = 64

// ParseHostAddr reads an IP address written as "ip", "ip:port", "[ipv6]"
// or "[ipv6]:port" (zones allowed), as proxies write X-Forwarded-For
// entries and Go writes remote addresses. ok is false for anything else
// (a host name, "unknown", garbage), which must never become a key of its
// own: the caller falls back to an address it can trust.
func ParseHostAddr(s string) (addr netip.Addr, ok bool) {
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

// AddrKey is addr as a key: IPv4-mapped IPv6 as IPv4, no zone, and IPv6
// cut to its first v6Bits bits ("2001:db8:1:2::/64"), since one subscriber
// usually holds a whole /64 and can rotate through it.
func AddrKey(addr netip.Addr, v6Bits int) string {
	addr = addr.Unmap().WithZone("")
	if addr.Is6() && v6Bits > 0 && v6Bits < 128 {
		if p, err := addr.Prefix(v6Bits); err == nil {
			return p.String()
		}
	}
	return addr.String()
}

// HostKey is a remote address ("ip:port", a unix socket's name) as a key:
// AddrKey of its IP, else its host as written, without a port.
func HostKey(s string, v6Bits int) string {
	if addr, ok := ParseHostAddr(s); ok {
		return AddrKey(addr, v6Bits)
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		return host
	}
	return s
}

// Hash is a short, stable digest of a secret (SHA-256, 128 bits kept, in
// hex), so an API key never reaches floodgate's store or logs and an
// over-long one cannot exceed floodgate's key size.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:16])
}
