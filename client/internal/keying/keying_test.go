package keying

import (
	"strings"
	"testing"
)

func TestParseHostAddrAndAddrKey(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ok   bool
		want string // AddrKey with DefaultIPv6Prefix
	}{
		{"203.0.113.7", true, "203.0.113.7"},
		{" 203.0.113.7:40001 ", true, "203.0.113.7"},
		{"[2001:db8:1:2::7]:443", true, "2001:db8:1:2::/64"},
		{"[2001:db8:1:2::7]", true, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:aaaa::1", true, "2001:db8:1:2::/64"},
		{"fe80::1%eth0", true, "fe80::/64"},
		{"::ffff:192.0.2.1", true, "192.0.2.1"},
		{"unknown", false, ""},
		{"proxy.example:80", false, ""},
		{"", false, ""},
	} {
		addr, ok := ParseHostAddr(tc.in)
		if ok != tc.ok {
			t.Errorf("ParseHostAddr(%q): ok %v, want %v", tc.in, ok, tc.ok)
			continue
		}
		if ok {
			if got := AddrKey(addr, DefaultIPv6Prefix); got != tc.want {
				t.Errorf("AddrKey(%q): %q, want %q", tc.in, got, tc.want)
			}
		}
	}
	a, _ := ParseHostAddr("2001:db8::7")
	if got := AddrKey(a, 128); got != "2001:db8::7" {
		t.Errorf("AddrKey with 128 bits: %q, want the address", got)
	}
}

func TestHash(t *testing.T) {
	h := Hash("k-123")
	if len(h) != 32 || strings.Contains(h, "k-123") || Hash("k-123") != h || Hash("k-124") == h {
		t.Fatalf("Hash: %q, want 32 stable hex digits that hide the secret", h)
	}
	if got := len(Hash(strings.Repeat("x", 1<<16))); got != 32 {
		t.Fatalf("Hash of a long secret: %d characters, want 32", got)
	}
}

func TestHostKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"10.0.0.7:443", "10.0.0.7"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[::ffff:10.0.0.7]:80", "10.0.0.7"},
		{"gateway.internal:8080", "gateway.internal"}, // not an IP: its host, without the port
		{"/run/app.sock", "/run/app.sock"},            // a unix socket's name, as it is
		{"@", "@"},
		{"", ""},
	} {
		if got := HostKey(tc.in, DefaultIPv6Prefix); got != tc.want {
			t.Errorf("HostKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
