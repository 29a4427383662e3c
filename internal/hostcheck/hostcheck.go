// Package hostcheck answers whether a host is safe to trust as local. It
// guards an HTTP port against DNS rebinding: a browser page on a name its
// attacker controls, rebound to 127.0.0.1 (or to any address of the
// server), is same-origin with the server and may call it as if it were
// local. Such a request carries the attacker's name in its Host header; a
// request that names the server by a loopback name, by an IP address or by
// a name the operator allows does not. And it says whether a gRPC target
// stays on this machine, where a bearer token may travel without TLS.
package hostcheck

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
)

// Allowed reports whether host (a Host header, with or without a port)
// names the server without a name an attacker could rebind: empty (an
// HTTP/1.0 request), an IP address (a rebinding needs a DNS name),
// localhost or a name under .localhost (resolved to loopback by the
// client itself), or one of names, compared without case and a trailing
// dot ("*" among names allows every host).
func Allowed(host string, names []string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "" || net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	return slices.ContainsFunc(names, func(n string) bool {
		n = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(n)), ".")
		return n == "*" || n == host
	})
}

// Guard serves next, except that a request whose Host is not Allowed by
// names is answered 403 with the reason, unless open says the request
// needs no guard (probes and decisions, which a rebinding page gains
// nothing from and which callers reach by service names). flag names the
// setting that allows more names, for the error.
func Guard(next http.Handler, names []string, open func(*http.Request) bool, flag string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if open(r) || Allowed(r.Host, names) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "Host %q is not allowed here: name the server by localhost or an IP address, or allow the name with %s\n", r.Host, flag)
	})
}

// LoopbackTarget reports whether a gRPC target ("host:port", or with a
// scheme such as "passthrough:///127.0.0.1:8081") names a loopback host
// or localhost, or is a unix socket.
func LoopbackTarget(target string) bool {
	if strings.HasPrefix(target, "unix:") || strings.HasPrefix(target, "unix-abstract:") {
		return true
	}
	if i := strings.Index(target, ":///"); i >= 0 {
		target = target[i+4:]
	}
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		host = target
	}
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}
