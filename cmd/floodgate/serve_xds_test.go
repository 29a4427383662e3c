package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/rules"
)

func parsed(t *testing.T, name, domain string, n int) *rules.Set {
	t.Helper()
	c, err := rules.Parse(name, []byte("domain: "+domain+"\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: "+strings.Repeat("1", n)+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// limitOf is the requests_per_unit of k=v in domain under l's rules; 0
// when nothing matches.
func limitOf(l *liveRules, domain string) int64 {
	ls := l.Current().Match(domain, []rules.Entry{{Key: "k", Value: "v"}})
	if len(ls) != 1 {
		return 0
	}
	return ls[0].Rate.Requests
}

// TestLiveRules: the files' and the xDS parts swap in together; a part
// that would define a domain twice is refused and the previous rules keep
// serving; a refused files' reload applies once xDS no longer clashes.
func TestLiveRules(t *testing.T) {
	swaps := 0
	l := &liveRules{changed: func() { swaps++ }}
	if l.Current() != nil {
		t.Fatal("rules before any part")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.setFile(parsed(t, "f.yaml", "f", 1)))
	_, err := l.setXDS([]*rules.Set{parsed(t, "xds:a", "a", 2)})
	must(err)
	if limitOf(l, "f") != 1 || limitOf(l, "a") != 11 || swaps != 2 {
		t.Fatalf("limits %d, %d after %d swaps; want 1, 11, 2", limitOf(l, "f"), limitOf(l, "a"), swaps)
	}

	// xDS defining the files' domain: refused, the previous rules stay.
	_, err = l.setXDS([]*rules.Set{parsed(t, "xds:a", "a", 3), parsed(t, "xds:clash", "f", 4)})
	if err == nil || err.Error() != `xds:clash: duplicate domain "f": already defined by f.yaml` {
		t.Errorf("xDS clash: err %v", err)
	}
	if limitOf(l, "f") != 1 || limitOf(l, "a") != 11 || swaps != 2 {
		t.Errorf("after the refused xDS part: limits %d, %d, %d swaps", limitOf(l, "f"), limitOf(l, "a"), swaps)
	}

	// A files' reload defining an xDS domain: refused, then applied once
	// the xDS part drops that domain.
	if err := l.setFile(parsed(t, "f.yaml", "a", 5)); err == nil || !strings.Contains(err.Error(), `duplicate domain "a"`) {
		t.Errorf("files' clash: err %v", err)
	}
	if limitOf(l, "f") != 1 || limitOf(l, "a") != 11 {
		t.Errorf("after the refused reload: limits %d, %d", limitOf(l, "f"), limitOf(l, "a"))
	}
	retried, err := l.setXDS([]*rules.Set{parsed(t, "xds:b", "b", 6)})
	must(err)
	if !retried || limitOf(l, "a") != 11111 || limitOf(l, "f") != 0 || limitOf(l, "b") != 111111 {
		t.Errorf("after xDS dropped a: retried %v, limits a %d, f %d, b %d", retried, limitOf(l, "a"), limitOf(l, "f"), limitOf(l, "b"))
	}
}

// TestXDSFlags: the xDS flags are checked before serving.
func TestXDSFlags(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	apply := func([]*rules.Set, string) error { return nil }
	tests := []struct {
		name string
		x    xdsFlags
		want string // "" when valid
	}{
		{"off", xdsFlags{}, ""},
		{"on", xdsFlags{server: "127.0.0.1:1", backoffMin: 1, backoffMax: 2}, ""},
		{"bad algorithm", xdsFlags{server: "127.0.0.1:1", algorithm: "leaky", backoffMin: 1, backoffMax: 2}, "--config-xds-algorithm"},
		{"backoff", xdsFlags{server: "127.0.0.1:1", backoffMin: 3, backoffMax: 2}, "--config-xds-backoff-min"},
		{"key without cert", xdsFlags{server: "127.0.0.1:1", tlsKey: "k.pem", backoffMin: 1, backoffMax: 2}, "go together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.x.client(apply, log)
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("err %v, want %q", err, tt.want)
			}
		})
	}
}
