package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/floodgate/floodgate/store/memstore"
)

// TestMemoryMaxBytes: --memory-max-bytes (or FLOODGATE_MEMORY_MAX_BYTES)
// reaches the embedded store, defaults to memstore.DefaultMaxBytes, and a
// cap below 1 MiB is refused.
func TestMemoryMaxBytes(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    int64
		wantErr string
	}{
		{"default", nil, nil, memstore.DefaultMaxBytes, ""},
		{"flag", []string{"--memory-max-bytes", "4194304"}, nil, 4 << 20, ""},
		{"env", nil, map[string]string{"FLOODGATE_MEMORY_MAX_BYTES": "8388608"}, 8 << 20, ""},
		{"too small", []string{"--memory-max-bytes", "1000"}, nil, 0, "--memory-max-bytes must be at least"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f serveFlags
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f.register(fs)
			if err := parseFlags(fs, tc.args, func(k string) string { return tc.env[k] }); err != nil {
				t.Fatal(err)
			}
			if f.memory.MaxBytes != tc.want && tc.wantErr == "" {
				t.Errorf("memory-max-bytes %d, want %d", f.memory.MaxBytes, tc.want)
			}
			s, _, err := serveEnv{f: &f, log: slog.Default()}.buildStore(context.Background(), nil, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("buildStore: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ms, ok := s.(*memstore.Store)
			if !ok {
				t.Fatalf("store %T, want the embedded store", s)
			}
			if got := ms.MaxBytes(); got != tc.want {
				t.Errorf("the store's memory cap is %d, want %d", got, tc.want)
			}
		})
	}
}

// TestServeUnexpectedArgument: an argument serve does not take is a usage
// error (exit 2) naming it, before anything starts.
func TestServeUnexpectedArgument(t *testing.T) {
	code, stdout, stderr := runCLI([]string{"serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "", "extra"}, nil)
	if code != 2 || stdout != "" || stderr != "floodgate serve: unexpected argument \"extra\"\n" {
		t.Fatalf("got exit %d, stdout %q, stderr %q; want exit 2 naming the argument", code, stdout, stderr)
	}
}

// TestServeConfigErrorPlain: a config serve cannot load is printed as
// config validate prints it, one plain line naming file:line:column (a
// log record with --log-format json), and serve exits 1.
func TestServeConfigErrorPlain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("domain: shop\ndescriptors:\n  - key: path\n    rate_limit: {unit: minute, requests_per_unit: -1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--config", path, "--grpc-addr", "127.0.0.1:0", "--http-addr", ""}
	_, _, validate := runCLI([]string{"config", "validate", path}, nil)
	code, stdout, stderr := runCLI(args, nil)
	if code != 1 || stdout != "" || stderr != "floodgate serve: "+validate {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, stdout, stderr, "floodgate serve: "+validate)
	}
	code, _, stderr = runCLI(append(args, "--log-format", "json"), nil)
	if code != 1 || !strings.HasPrefix(stderr, `{"time":`) || !strings.Contains(stderr, "requests_per_unit must not be negative") {
		t.Fatalf("json: exit %d, stderr %q; want exit 1 and a JSON record", code, stderr)
	}
}
