package giveback_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/giveback"
)

// TestAllowed: a call that carries its port's refusal may give nothing
// back, whatever the kind; one that carries none (a loopback port, no
// tokens) may give back every way. The roles with tokens are
// internal/auth's (TestRefundPermission, TestLeakyGiveBackPermission).
func TestAllowed(t *testing.T) {
	const why = "bound beyond loopback: --auth-token-file"
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		refused bool
	}{
		{"no refusal", context.Background(), false},
		{"empty refusal", giveback.WithRefusal(context.Background(), ""), false},
		{"port refusal", giveback.WithRefusal(context.Background(), why), true},
	} {
		for _, kind := range []giveback.Kind{giveback.Reset, giveback.Refund} {
			err := giveback.Allowed(tc.ctx, kind)
			if errors.Is(err, giveback.ErrRefused) != tc.refused {
				t.Errorf("%s, kind %d: %v, want refused %v", tc.name, kind, err, tc.refused)
			}
			if tc.refused && err.Error() != why {
				t.Errorf("%s: %q, want the port's reason", tc.name, err)
			}
		}
	}
}

// TestPortRefusal: without tokens, only a port bound to loopback gives
// back; with tokens (or client certificates), every port does.
func TestPortRefusal(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		known   bool
		refused bool
	}{
		{"127.0.0.1:8080", false, false}, {"127.0.0.2:8080", false, false}, {"[::1]:8080", false, false}, {"localhost:8080", false, false},
		{":8080", false, true}, {"0.0.0.0:8080", false, true}, {"[::]:8080", false, true}, {"10.0.0.5:8080", false, true},
		{"example.com:8080", false, true}, {"localhost.example.com:1", false, true}, {"no-port", false, true}, {"", false, true},
		{":8080", true, false}, {"0.0.0.0:8081", true, false},
	} {
		why := giveback.PortRefusal(tc.addr, tc.known)
		if (why != "") != tc.refused {
			t.Errorf("PortRefusal(%q, %v) = %q, want refused %v", tc.addr, tc.known, why, tc.refused)
		}
		if why != "" && (!strings.Contains(why, "--auth-token-file") || !strings.Contains(why, tc.addr) || !strings.Contains(why, "refunds")) {
			t.Errorf("PortRefusal(%q): %q does not name the port, what it refuses and the fix", tc.addr, why)
		}
	}
}
