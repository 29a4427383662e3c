package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/rules"
)

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
