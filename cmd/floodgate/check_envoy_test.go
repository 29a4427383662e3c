package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/server"
)

const envoyCheckRules = `domain: shop
descriptors:
  - key: path
    value: /login
    descriptors:
      - key: user
        rate_limit: {name: login_per_user, algorithm: fixed_window, unit: hour, requests_per_unit: 2}
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 100}
`

// TestCheckEnvoy: check --domain asks ShouldRateLimit with one descriptor
// per --descriptor and --hits as hits_addend, and prints each answer's
// overall code and every descriptor's status; --fail-on-deny exits 3 on
// OVER_LIMIT.
func TestCheckEnvoy(t *testing.T) {
	addr := benchServer(t, envoyCheckRules, server.GRPCSettings{})
	code, out, errOut := runCLI([]string{"check", "--addr", addr, "--domain", "shop",
		"--descriptor", "path=/login,user=alice", "--descriptor", "remote_address=10.0.0.1", "--repeat", "3"}, nil)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var lines []string // each line's fields, one blank apart
	for _, l := range strings.Split(out, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	flat := strings.Join(lines, "\n")
	for _, want := range []string{
		"attempt 1: OK\n", "attempt 2: OK\n", "attempt 3: OVER_LIMIT\n",
		"path=/login,user=alice OK 1 2/hour", "path=/login,user=alice OK 0 2/hour",
		"path=/login,user=alice OVER_LIMIT 0 2/hour",
		"remote_address=10.0.0.1 OK 97 100/hour",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	code, out, errOut = runCLI([]string{"check", "--addr", addr, "--domain", "shop",
		"--descriptor", "path=/login,user=bob", "--hits", "3", "--json", "--fail-on-deny"}, nil)
	var resp struct {
		OverallCode string `json:"overallCode"`
		Statuses    []struct {
			Code string `json:"code"`
		} `json:"statuses"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil || code != 3 || errOut != "" {
		t.Fatalf("exit %d, stderr %q, stdout %q (%v); want exit 3 and one JSON answer", code, errOut, out, err)
	}
	if resp.OverallCode != "OVER_LIMIT" || len(resp.Statuses) != 1 || resp.Statuses[0].Code != "OVER_LIMIT" {
		t.Fatalf("3 hits on a limit of 2: %+v, want OVER_LIMIT", resp)
	}
}

// TestCheckEnvoyUsage: the two forms' flags do not mix, and a bad
// descriptor is named; each is a usage error (exit 2) in one line.
func TestCheckEnvoyUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--domain", "shop"}, "--domain needs at least one --descriptor"},
		{[]string{"--domain", "shop", "--descriptor", "a=1", "--key", "k"}, "--key is for Check requests"},
		{[]string{"--domain", "shop", "--descriptor", "a=1", "--cost", "2"}, "--cost is for Check requests"},
		{[]string{"--domain", "shop", "--descriptor", "a"}, `--descriptor "a": entry 1 ("a") has no '='`},
		{[]string{"--domain", "shop", "--descriptor", "a=1", "--hits", "0"}, "--hits must be at least 1"},
		{[]string{"--key", "k", "--limit", "1/s", "--descriptor", "a=1"}, "--descriptor and --hits go with --domain"},
		{[]string{"--domain", "shop", "--descriptor", "a=1", "--token", "t", "--addr", "192.0.2.1:8081"}, "--token needs --tls"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(append([]string{"check"}, tc.args...), nil)
			if code != 2 || out != "" || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", code, out, errOut, tc.want)
			}
		})
	}
}

// TestCheckEnvoyTokenTargets: a token without --tls is refused for the
// Envoy form exactly where the Check form's client refuses it: allowed
// for loopback hosts and unix sockets, refused for any other target.
func TestCheckEnvoyTokenTargets(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"localhost:8081", true},
		{"127.0.0.1:8081", true},
		{"[::1]:8081", true},
		{"passthrough:///127.0.0.1:8081", true},
		{"unix:///run/floodgate.sock", true},
		{"unix-abstract:floodgate", true},
		{"floodgate.internal:8081", false},
		{"dns:///floodgate:8081", false},
		{"10.0.0.7:8081", false},
	} {
		f := &checkFlags{callFlags: callFlags{addr: tc.addr, token: "t"}}
		conn, err := f.dialEnvoy()
		if tc.ok != (err == nil) {
			t.Errorf("--addr %s --token t: err %v, want allowed %v", tc.addr, err, tc.ok)
		}
		if err == nil {
			conn.Close()
		} else if !strings.Contains(err.Error(), "--token needs --tls") {
			t.Errorf("--addr %s: %v, want the --token needs --tls refusal", tc.addr, err)
		}
	}
}
