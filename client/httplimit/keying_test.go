package httplimit_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/httplimit"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
)

// twoPerMinute is the limit of the keying tests.
var twoPerMinute = client.Limit{Algorithm: algorithms.SlidingWindow, Requests: 2, Period: time.Minute}

// TestMiddlewareForwardedForForms: behind one trusted
// proxy, an X-Forwarded-For entry with a port, in brackets, or with a zone
// keys its address, so changing the port gets no fresh limit; an IPv6
// entry keeps its /64; an entry that is no address at all falls back to
// the peer (the proxy) instead of becoming a key of its own.
func TestMiddlewareForwardedForForms(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	h := httplimit.Middleware(floodgatetest.Dial(t, addr), httplimit.Config{Limit: twoPerMinute, TrustedProxyHops: 1})(ok)
	for _, tc := range []struct {
		name    string
		remote  string
		entries []string // the last X-Forwarded-For entry of each request
	}{
		{"ipv4 with ports", "10.0.0.1:1", []string{"203.0.113.7:40001", "203.0.113.7:40002", "203.0.113.7", "203.0.113.7:40004", "203.0.113.7:40005"}},
		{"ipv6 bracketed, with ports, in one /64", "10.0.0.1:1", []string{"[2001:db8::1]:443", "[2001:db8::2]:443", "[2001:db8::3]", "2001:db8::4", "[2001:db8::5%eth0]:1"}},
		{"ipv4-mapped with a port", "10.0.0.1:1", []string{"[::ffff:198.51.100.4]:1", "198.51.100.4:2", "[::ffff:198.51.100.4]:3"}},
		{"not an address: the peer", "10.0.0.9:1", []string{"not-an-ip", "garbage:1", "unknown", "[::1", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, e := range tc.entries {
				want := 200
				if i >= 2 {
					want = 429
				}
				if got := get(h, tc.remote, "X-Forwarded-For", "6.6.6.6, "+e).Code; got != want {
					t.Fatalf("request %d (X-Forwarded-For %q): got %d, want %d", i+1, e, got, want)
				}
			}
		})
	}
	// The garbage fell back to the proxy's own address, which is now spent.
	if got := get(h, "10.0.0.9:2").Code; got != 429 {
		t.Fatalf("the proxy's address after garbage entries: got %d, want 429", got)
	}
}

// TestMiddlewareMadeUpKeys: by default an API key the
// middleware cannot verify never escapes its address's limit: rotating
// made-up keys from one address stops at the IP limit.
func TestMiddlewareMadeUpKeys(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	h := httplimit.Middleware(floodgatetest.Dial(t, addr), httplimit.Config{Limit: twoPerMinute})(ok)
	for i, key := range []string{"k1", "k2", "k3", "k4", "k5"} {
		want := 200
		if i >= 2 {
			want = 429
		}
		if got := get(h, "192.0.2.1:1", "X-API-Key", key).Code; got != want {
			t.Fatalf("made-up key %s from one address: got %d, want %d", key, got, want)
		}
	}
	// An empty key is no key: the address's limit, already spent.
	if got := get(h, "192.0.2.1:2", "X-API-Key", " ").Code; got != 429 {
		t.Fatalf("blank key: got %d, want 429", got)
	}
}

// TestMiddlewareVerifiedKeys: a key VerifyAPIKey accepts has its own limit,
// whatever its address; a key it rejects counts as no key.
func TestMiddlewareVerifiedKeys(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	h := httplimit.Middleware(floodgatetest.Dial(t, addr), httplimit.Config{
		Limit:        twoPerMinute,
		VerifyAPIKey: func(_ *http.Request, key string) bool { return strings.HasPrefix(key, "good-") },
	})(ok)
	for i, tc := range []struct {
		key  string
		want int
	}{
		{"good-a", 200}, {"good-a", 200}, {"good-a", 429}, // the key's own limit
		{"good-b", 200}, {"good-b", 200}, // not the address's
		{"made-up-1", 200}, {"made-up-2", 200}, {"made-up-3", 429}, // the address's limit
		{"", 429},
		{"good-c", 200},
	} {
		if got := get(h, "192.0.2.1:1", "X-API-Key", tc.key).Code; got != tc.want {
			t.Fatalf("request %d (key %q): got %d, want %d", i+1, tc.key, got, tc.want)
		}
	}
}
