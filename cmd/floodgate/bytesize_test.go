package main

import (
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/floodgate/floodgate/store/memstore"
)

// TestByteSizeFlags: every byte-size flag takes a whole number of bytes or
// one with a decimal (KB, MB, GB) or binary (KiB, MiB, GiB) unit, from the
// command line or the environment; a bad size names the flag, the value
// and the forms wanted.
func TestByteSizeFlags(t *testing.T) {
	get := map[string]func(f *serveFlags) int64{
		"memory-max-bytes":      func(f *serveFlags) int64 { return f.memory.MaxBytes },
		"max-key-bytes":         func(f *serveFlags) int64 { return int64(f.maxKeyBytes) },
		"max-recv-msg-bytes":    func(f *serveFlags) int64 { return int64(f.maxRecvMsgBytes) },
		"max-header-list-bytes": func(f *serveFlags) int64 { return int64(f.limits.MaxHeaderListBytes) },
	}
	tests := []struct {
		flag, value string
		env         bool
		want        int64
		wantErr     string
	}{
		{"memory-max-bytes", "256MiB", false, 256 << 20, ""},
		{"memory-max-bytes", "1GiB", false, 1 << 30, ""},
		{"memory-max-bytes", "512KiB", false, 512 << 10, ""},
		{"memory-max-bytes", "1000000", false, 1000000, ""},
		{"memory-max-bytes", "64MB", false, 64000000, ""},
		{"memory-max-bytes", "2GB", false, 2000000000, ""},
		{"memory-max-bytes", "3KB", false, 3000, ""},
		{"memory-max-bytes", "7B", false, 7, ""},
		{"memory-max-bytes", "99MiB", false, 99 << 20, ""},
		{"memory-max-bytes", "-1KiB", false, 0, "want a size in bytes"},
		{"memory-max-bytes", "99999999999999999999", false, 0, "out of range"},
		{"memory-max-bytes", "1 MiB", false, 1 << 20, ""},
		{"memory-max-bytes", "128mib", false, 128 << 20, ""},
		{"memory-max-bytes", "256MiB", true, 256 << 20, ""},
		{"max-key-bytes", "4KiB", false, 4096, ""},
		{"max-key-bytes", "-1", false, -1, ""}, // refused later as "must be positive"
		{"max-recv-msg-bytes", "8MiB", false, 8 << 20, ""},
		{"max-header-list-bytes", "16KiB", false, 16 << 10, ""},
		{"memory-max-bytes", "256MiBs", false, 0, "--memory-max-bytes \"256MiBs\": want a size in bytes"},
		{"memory-max-bytes", "1.5GiB", false, 0, "such as 1000000, 64MB or 256MiB"},
		{"memory-max-bytes", "MiB", false, 0, "--memory-max-bytes \"MiB\""},
		{"memory-max-bytes", "", false, 0, "want a size in bytes"},
		{"memory-max-bytes", "16EiB", false, 0, "want a size in bytes"},
		{"memory-max-bytes", "9000000000GiB", false, 0, "out of range"},
		{"max-key-bytes", "3TB", false, 0, "--max-key-bytes \"3TB\""},
		{"max-header-list-bytes", "-1", false, 0, "--max-header-list-bytes \"-1\""},
		{"max-header-list-bytes", "-1KiB", false, 0, "--max-header-list-bytes \"-1KiB\""},
		{"memory-max-bytes", "x", true, 0, "$FLOODGATE_MEMORY_MAX_BYTES"},
	}
	for _, tc := range tests {
		t.Run(tc.flag+"="+tc.value, func(t *testing.T) {
			var args []string
			env := map[string]string{}
			if tc.env {
				env[envName(tc.flag)] = tc.value
			} else {
				args = []string{"--" + tc.flag + "=" + tc.value}
			}
			var stderr strings.Builder
			f, err := parseServeFlags(args, func(k string) string { return env[k] }, io.Discard, &stderr)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(stderr.String(), tc.wantErr) {
					t.Fatalf("err %v, stderr %q, want it to contain %q", err, stderr.String(), tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v: %s", err, stderr.String())
			}
			if got := get[tc.flag](&f); got != tc.want {
				t.Errorf("--%s %s = %d, want %d", tc.flag, tc.value, got, tc.want)
			}
		})
	}
}

// TestByteSizeDefaults: the byte-size flags keep their defaults, print
// them in --help as plain numbers of bytes, and show their type as a size.
func TestByteSizeDefaults(t *testing.T) {
	var f serveFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs)
	if got, want := fs.Lookup("memory-max-bytes").DefValue, strconv.FormatInt(memstore.DefaultMaxBytes, 10); got != want {
		t.Errorf("--memory-max-bytes default %s, want %s", got, want)
	}
	for _, name := range []string{"memory-max-bytes", "max-key-bytes", "max-recv-msg-bytes", "max-header-list-bytes"} {
		fl := fs.Lookup(name)
		if fl == nil || fl.DefValue == "" || fl.DefValue == "0" || strings.ContainsAny(fl.DefValue, "KMGiB") {
			t.Errorf("--%s default %+v, want a positive number of bytes", name, fl)
			continue
		}
		if got := fl.Value.String(); got != fl.DefValue {
			t.Errorf("--%s prints %q, its default %q", name, got, fl.DefValue)
		}
		var help strings.Builder
		printFlag(&help, fl)
		if !strings.HasPrefix(help.String(), "  --"+name+" size  [") {
			t.Errorf("--help line %q, want the type size", help.String())
		}
	}
}
