package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/xdsrules"
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
		{"on", xdsFlags{opts: xdsrules.Options{Server: "127.0.0.1:1", BackoffMin: 1, BackoffMax: 2}}, ""},
		{"bad algorithm", xdsFlags{opts: xdsrules.Options{Server: "127.0.0.1:1", DefaultAlgorithm: "leaky", BackoffMin: 1, BackoffMax: 2}}, "--config-xds-algorithm"},
		{"backoff", xdsFlags{opts: xdsrules.Options{Server: "127.0.0.1:1", BackoffMin: 3, BackoffMax: 2}}, "--config-xds-backoff-min"},
		{"key without cert", xdsFlags{opts: xdsrules.Options{Server: "127.0.0.1:1", BackoffMin: 1, BackoffMax: 2}, tlsFiles: auth.ClientFiles{Key: "k.pem"}}, "go together"},
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
