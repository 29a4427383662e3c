package xdsrules

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit/testpki"
	"github.com/floodgate/floodgate/internal/xdstest"
)

const testNode = "node-1"

// applied records what a client applied; refuse makes Apply fail.
type applied struct {
	mu       sync.Mutex
	versions []string
	domains  [][]string
	refuse   error
}

func (a *applied) apply(parts []*rules.Set, version string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refuse != nil {
		return a.refuse
	}
	c, err := rules.Merge(parts...)
	if err != nil {
		return err
	}
	a.versions = append(a.versions, version)
	a.domains = append(a.domains, c.Domains())
	return nil
}

func (a *applied) last() (string, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.versions) == 0 {
		return "", nil
	}
	return a.versions[len(a.versions)-1], a.domains[len(a.domains)-1]
}

func (a *applied) waitVersion(t *testing.T, v string) []string {
	t.Helper()
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(5 * time.Millisecond) {
		if got, d := a.last(); got == v {
			return d
		}
	}
	got, _ := a.last()
	t.Fatalf("version %q not applied in 5s (last: %q)", v, got)
	return nil
}

func runClient(t *testing.T, addr string, a *applied) {
	t.Helper()
	runClientTLS(t, addr, a, nil)
}

func runClientTLS(t *testing.T, addr string, a *applied, tlsCfg *tls.Config) {
	t.Helper()
	c, err := New(Options{Server: addr, NodeID: testNode, Apply: a.apply, TLS: tlsCfg, BackoffMin: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestClientAckNack(t *testing.T) {
	m := xdstest.Start(t, "127.0.0.1:0", testNode)
	m.Set(t, "1", userOnly("a", "da"), userOnly("b", "db"))
	a := &applied{}
	runClient(t, m.Addr(), a)

	if d := a.waitVersion(t, "1"); strings.Join(d, ",") != "da,db" {
		t.Errorf("version 1: domains %v, want da, db", d)
	}
	first := m.Wait(t, 5*time.Second, "first request", func(*discoveryv3.DiscoveryRequest) bool { return true })
	if first.GetNode().GetId() != testNode || first.GetTypeUrl() != typeURL || len(first.GetResourceNames()) != 0 || first.GetVersionInfo() != "" {
		t.Errorf("first request: %v", first)
	}
	m.Wait(t, 5*time.Second, "ACK of 1", func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetVersionInfo() == "1" && r.GetResponseNonce() != "" && !xdstest.IsNACK(r)
	})

	// Invalid: NACKed with version 1 and the error; nothing applied.
	bad := userOnly("a", "da")
	bad.Descriptors[0].Key = ""
	m.Set(t, "2", bad)
	nack := m.Wait(t, 5*time.Second, "NACK of 2", xdstest.IsNACK)
	if nack.GetVersionInfo() != "1" || nack.GetResponseNonce() == "" ||
		nack.GetErrorDetail().GetMessage() != "xds:a: descriptors[0].key: descriptor has an empty key" {
		t.Errorf("NACK: version %q, nonce %q, detail %q", nack.GetVersionInfo(), nack.GetResponseNonce(), nack.GetErrorDetail().GetMessage())
	}

	// The cache sends the NACKed version back for every NACK; they back
	// off (20ms doubling to 100ms: about 12 a second, not hundreds).
	time.Sleep(time.Second)
	if n := m.Count(xdstest.IsNACK); n > 25 {
		t.Errorf("%d NACKs in about a second, want them backing off", n)
	}
	if v, _ := a.last(); v != "1" {
		t.Errorf("applied %q after the NACK, want 1", v)
	}

	// Refused by Apply (a clash with the files, say): NACKed the same way.
	a.mu.Lock()
	a.refuse = errors.New("domain clash")
	a.mu.Unlock()
	m.Set(t, "3", userOnly("a", "da"))
	m.Wait(t, 5*time.Second, "NACK of 3", func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetErrorDetail().GetMessage() == "domain clash" && r.GetVersionInfo() == "1"
	})
	a.mu.Lock()
	a.refuse = nil
	a.mu.Unlock()

	// A valid version after NACKs applies (within the NACK backoff).
	m.Set(t, "4", userOnly("c", "dc"))
	if d := a.waitVersion(t, "4"); strings.Join(d, ",") != "dc" {
		t.Errorf("version 4: domains %v, want dc", d)
	}

	// An empty snapshot removes every xDS domain.
	m.Set(t, "5")
	if d := a.waitVersion(t, "5"); len(d) != 0 {
		t.Errorf("version 5: domains %v, want none", d)
	}
}

func TestClientReconnects(t *testing.T) {
	// The server is not up when the client starts.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	a := &applied{}
	runClient(t, addr, a)
	time.Sleep(200 * time.Millisecond)

	m := xdstest.Start(t, addr, testNode)
	m.Set(t, "1", userOnly("a", "da"))
	a.waitVersion(t, "1")

	// A restart: the new server (a new cache) hears the version applied.
	m.Stop()
	m2 := xdstest.Start(t, addr, testNode)
	m2.Set(t, "7", userOnly("b", "db"))
	if d := a.waitVersion(t, "7"); strings.Join(d, ",") != "db" {
		t.Errorf("after the restart: domains %v, want db", d)
	}
	r := m2.Wait(t, 5*time.Second, "first request after the restart", func(*discoveryv3.DiscoveryRequest) bool { return true })
	if r.GetVersionInfo() != "1" || r.GetNode().GetId() != testNode {
		t.Errorf("first request after the restart: version %q, node %q; want 1, %s", r.GetVersionInfo(), r.GetNode().GetId(), testNode)
	}
}

// TestClientMutualTLS: the client verifies the management server by
// --config-xds-tls-ca and presents its certificate; without one, a server
// asking for it gives no rules.
func TestClientMutualTLS(t *testing.T) {
	ca := testpki.NewCA(t, "xds-ca")
	dir := t.TempDir()
	srvCert, srvKey, _ := ca.Issue(t, "mgmt", true)
	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert})
	m := xdstest.Start(t, "127.0.0.1:0", testNode, grpc.Creds(creds))
	m.Set(t, "1", userOnly("a", "da"))
	caFile := testpki.WriteFile(t, dir, "ca.pem", ca.PEM)
	cliCert, cliKey, _ := ca.Issue(t, "floodgate", false)
	certFile := testpki.WriteFile(t, dir, "cert.pem", cliCert)
	keyFile := testpki.WriteFile(t, dir, "key.pem", cliKey)

	noCert := &applied{}
	cfg, err := auth.ClientTLS(auth.ClientFiles{CA: caFile}, auth.ClientFiles{})
	if err != nil {
		t.Fatal(err)
	}
	runClientTLS(t, m.Addr(), noCert, cfg)

	a := &applied{}
	if cfg, err = auth.ClientTLS(auth.ClientFiles{CA: caFile, Cert: certFile, Key: keyFile}, auth.ClientFiles{}); err != nil {
		t.Fatal(err)
	}
	runClientTLS(t, m.Addr(), a, cfg)
	a.waitVersion(t, "1")
	if v, _ := noCert.last(); v != "" {
		t.Errorf("a client without a certificate applied %q", v)
	}
}

func TestNewOptions(t *testing.T) {
	apply := func([]*rules.Set, string) error { return nil }
	if _, err := New(Options{Apply: apply}); err == nil {
		t.Error("no server: no error")
	}
	if _, err := New(Options{Server: "127.0.0.1:1"}); err == nil {
		t.Error("no Apply: no error")
	}
}

// TestNACKMessageIsRefusals: a Refusal NACKs with its own message (no
// local detail goes to the management server); other errors with their
// text.
func TestNACKMessageIsRefusals(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"refusal", &Refusal{Message: `xds:a: domain "d" is defined by this server's local config files too`, Err: errors.New("already defined by /etc/floodgate/d.yaml")},
			`xds:a: domain "d" is defined by this server's local config files too`},
		{"wrapped refusal", fmt.Errorf("apply: %w", &Refusal{Message: "m", Err: errors.New("/etc/x")}), "m"},
		{"plain", errors.New("plain"), "plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Client{opts: Options{Apply: func([]*rules.Set, string) error { return tt.err }, Log: slog.New(slog.DiscardHandler)}}
			got, _ := c.answer(&discoveryv3.DiscoveryResponse{TypeUrl: typeURL, VersionInfo: "1", Nonce: "n"})
			if got != tt.want {
				t.Errorf("NACK message %q, want %q", got, tt.want)
			}
			if tt.name != "plain" && !strings.Contains(tt.err.Error(), "/etc/") {
				t.Errorf("local error %q lost its detail", tt.err)
			}
		})
	}
}

// TestNACKRepeatAfterAccept: a NACK repeats (and waits) only for the
// version NACKed last with no version accepted since.
func TestNACKRepeatAfterAccept(t *testing.T) {
	refuse := true
	c := &Client{opts: Options{Log: slog.New(slog.DiscardHandler), Apply: func([]*rules.Set, string) error {
		if refuse {
			return errors.New("no")
		}
		return nil
	}}}
	resp := func(v string) *discoveryv3.DiscoveryResponse {
		return &discoveryv3.DiscoveryResponse{TypeUrl: typeURL, VersionInfo: v}
	}
	steps := []struct {
		refuse     bool
		version    string
		nack       bool
		wantRepeat bool
	}{
		{true, "1", true, false},
		{true, "1", true, true},
		{false, "2", false, false},
		{true, "1", true, false}, // accepted since: a new NACK, logged, no wait
	}
	for i, s := range steps {
		refuse = s.refuse
		nack, repeat := c.answer(resp(s.version))
		if (nack != "") != s.nack || repeat != s.wantRepeat {
			t.Errorf("step %d: nack %q, repeat %v; want nack %v, repeat %v", i, nack, repeat, s.nack, s.wantRepeat)
		}
	}
}
