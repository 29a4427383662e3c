package giveback

import "net"

// Loopback reports whether the host of a listen address host:port is
// a loopback address or "localhost". An empty host (every address), an
// unspecified one and any other name are not.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
