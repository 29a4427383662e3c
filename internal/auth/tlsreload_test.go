package auth_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/internal/testkit/testpki"
)

// newTestCA is a certificate authority made up for one test.
func newTestCA(t testing.TB, name string) *testpki.CA { return testpki.NewCA(t, name) }

// issueClient is a tls.Certificate issued by ca for a client.
func issueClient(t testing.TB, ca *testpki.CA) tls.Certificate {
	t.Helper()
	c, k, _ := ca.Issue(t, "client", false)
	cert, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// writeAtomic replaces path's contents the way rotation tools do: a new
// file renamed over the old one.
func writeAtomic(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// lockedBuffer is a log sink safe for the handshake goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serveTLS serves grpc.health.v1 with cfg on a loopback TCP port.
func serveTLS(t testing.TB, cfg *tls.Config) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// tlsClient connects to addr trusting roots, presenting certs.
func tlsClient(t testing.TB, addr string, roots []byte, certs ...tls.Certificate) *grpc.ClientConn {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(roots)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs:      pool,
		ServerName:   "localhost",
		Certificates: certs,
	})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// healthSerial makes a health check on conn and returns the serial of the
// certificate the server presented.
func healthSerial(conn *grpc.ClientConn) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var p peer.Peer
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		return "", err
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return "", status.Error(codes.Internal, "no TLS peer certificate")
	}
	return info.State.PeerCertificates[0].SerialNumber.String(), nil
}

// tlsFiles writes a server certificate from ca (and, optionally, a client
// CA bundle) into a temp folder and returns the paths and the serial.
func tlsFiles(t testing.TB, ca *testpki.CA, clientCA []byte) (certFile, keyFile, caFile, serial string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	c, k, serial := ca.Issue(t, "floodgate", true)
	writeAtomic(t, certFile, c)
	writeAtomic(t, keyFile, k)
	if clientCA != nil {
		caFile = filepath.Join(dir, "client-ca.crt")
		writeAtomic(t, caFile, clientCA)
	}
	return certFile, keyFile, caFile, serial
}

func TestTLSServes(t *testing.T) {
	ca := newTestCA(t, "server CA")
	certFile, keyFile, _, serial := tlsFiles(t, ca, nil)
	cfg, r, err := auth.NewTLSConfigWithReloader(t.Context(), auth.TLSFiles{Cert: certFile, Key: keyFile}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if cfg.MinVersion != tls.VersionTLS12 || r.MutualTLS() || cfg.ClientAuth != tls.NoClientCert {
		t.Fatalf("got MinVersion %x mTLS %v ClientAuth %v, want TLS 1.2, no mTLS, NoClientCert", cfg.MinVersion, r.MutualTLS(), cfg.ClientAuth)
	}
	if got := r.Certificate().SerialNumber.String(); got != serial {
		t.Fatalf("Certificate serial: got %s, want %s", got, serial)
	}
	addr := serveTLS(t, cfg)

	got, err := healthSerial(tlsClient(t, addr, ca.PEM))
	if err != nil || got != serial {
		t.Fatalf("health check over TLS: got serial %q err %v, want %s, nil", got, err, serial)
	}

	// A client that does not trust the CA refuses the server.
	other := newTestCA(t, "unrelated CA")
	_, err = healthSerial(tlsClient(t, addr, other.PEM))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted server: got %v, want Unavailable about the certificate", err)
	}

	// TLS 1.1 is refused.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	old, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "localhost", MaxVersion: tls.VersionTLS11, NextProtos: []string{"h2"}})
	if err == nil {
		old.Close()
		t.Fatal("TLS 1.1 handshake succeeded, want it refused")
	}
}

func TestMutualTLS(t *testing.T) {
	serverCA := newTestCA(t, "server CA")
	clientCA := newTestCA(t, "client CA")
	otherCA := newTestCA(t, "other CA")
	certFile, keyFile, caFile, _ := tlsFiles(t, serverCA, clientCA.PEM)
	cfg, r, err := auth.NewTLSConfigWithReloader(t.Context(), auth.TLSFiles{Cert: certFile, Key: keyFile, ClientCA: caFile}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if !r.MutualTLS() || cfg.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatalf("got mTLS %v ClientAuth %v, want true, RequireAndVerifyClientCert", r.MutualTLS(), cfg.ClientAuth)
	}
	addr := serveTLS(t, cfg)

	ref := func(c tls.Certificate) *tls.Certificate { return &c }
	tests := []struct {
		name     string
		cert     *tls.Certificate // presented whatever CAs the server asks for
		wantCode codes.Code
		wantTLS  string // the TLS alert a raw handshake gets; "" for none
	}{
		{"client CA's certificate", ref(issueClient(t, clientCA)), codes.OK, ""},
		{"no certificate", nil, codes.Unavailable, "certificate required"},
		{"another CA's certificate", ref(issueClient(t, otherCA)), codes.Unavailable, "unknown certificate authority"},
		{"server CA's certificate", ref(issueClient(t, serverCA)), codes.Unavailable, "unknown certificate authority"},
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(serverCA.PEM)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clientCfg := &tls.Config{
				RootCAs:    pool,
				ServerName: "localhost",
				// Present tc.cert even when its CA is not one the server
				// lists (Go clients otherwise send none).
				GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
					if tc.cert == nil {
						return &tls.Certificate{}, nil
					}
					return tc.cert, nil
				},
			}
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(clientCfg)))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, err = healthSerial(conn)
			if status.Code(err) != tc.wantCode {
				t.Fatalf("gRPC: got %v, want %v", err, tc.wantCode)
			}

			// The same handshake by hand: under TLS 1.3 the server's
			// verdict on the client certificate arrives as an alert on the
			// first read.
			raw := clientCfg.Clone()
			raw.NextProtos = []string{"h2"}
			c, err := tls.Dial("tcp", addr, raw)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.Read(make([]byte, 1))
			if tc.wantTLS == "" {
				if err != nil {
					t.Fatalf("raw TLS read: got %v, want the server's HTTP/2 settings", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantTLS) {
				t.Fatalf("raw TLS read: got %v, want the alert %q", err, tc.wantTLS)
			}
		})
	}
}

func TestTLSRotation(t *testing.T) {
	ca := newTestCA(t, "server CA")
	clientCA := newTestCA(t, "client CA")
	nextClientCA := newTestCA(t, "next client CA")
	certFile, keyFile, caFile, serial1 := tlsFiles(t, ca, clientCA.PEM)
	logs := &lockedBuffer{}
	cfg, closer, err := auth.NewTLSConfig(t.Context(), auth.TLSFiles{Cert: certFile, Key: keyFile, ClientCA: caFile}, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	addr := serveTLS(t, cfg)
	clientCert := issueClient(t, clientCA)

	// A connection made before the rotation...
	before := tlsClient(t, addr, ca.PEM, clientCert)
	if got, err := healthSerial(before); err != nil || got != serial1 {
		t.Fatalf("before rotation: got serial %q err %v, want %s", got, err, serial1)
	}

	// ...rotate the certificate and key, and trust a second client CA too.
	c, k, serial2 := ca.Issue(t, "floodgate rotated", true)
	writeAtomic(t, keyFile, k)
	writeAtomic(t, certFile, c)
	writeAtomic(t, caFile, append(append([]byte{}, clientCA.PEM...), nextClientCA.PEM...))

	// New connections see the new certificate within about
	// filewatch.DebounceQuiet.
	testkit.Eventually(t, "new connections to get the new certificate", func() bool {
		got, err := healthSerial(tlsClient(t, addr, ca.PEM, clientCert))
		return err == nil && got == serial2
	})
	// The new client CA applies.
	if _, err := healthSerial(tlsClient(t, addr, ca.PEM, issueClient(t, nextClientCA))); err != nil {
		t.Fatalf("client of the newly trusted CA: got %v, want OK", err)
	}
	// The connection made before still works, on the certificate it had.
	if got, err := healthSerial(before); err != nil || got != serial1 {
		t.Fatalf("connection from before the rotation: got serial %q err %v, want %s, nil", got, err, serial1)
	}
	if !strings.Contains(logs.String(), "tls certificate reloaded") {
		t.Fatalf("logs lack the reload:\n%s", logs)
	}
	if strings.Contains(logs.String(), "PRIVATE KEY") || strings.Contains(logs.String(), string(k[40:80])) {
		t.Fatalf("logs hold key material:\n%s", logs)
	}
}

func TestTLSBadFileKeepsServing(t *testing.T) {
	ca := newTestCA(t, "server CA")
	certFile, keyFile, _, serial1 := tlsFiles(t, ca, nil)
	logs := &lockedBuffer{}
	cfg, r, err := auth.NewTLSConfigWithReloader(t.Context(), auth.TLSFiles{Cert: certFile, Key: keyFile}, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	addr := serveTLS(t, cfg)
	c2, k2, serial2 := ca.Issue(t, "floodgate next", true)

	steps := []struct {
		name       string
		file       string
		data       []byte
		wantErr    string // of Reload; "" for none
		wantSerial string
	}{
		{"garbage certificate", certFile, []byte("not a certificate"), "failed to find any PEM data", serial1},
		{"new certificate, old key", certFile, c2, "private key does not match public key", serial1},
		{"then its key", keyFile, k2, "", serial2},
		{"key is a certificate", keyFile, c2, "found a certificate rather than a key", serial2},
	}
	for _, s := range steps {
		writeAtomic(t, s.file, s.data)
		err := r.Reload()
		if (s.wantErr == "" && err != nil) || (s.wantErr != "" && (err == nil || !strings.Contains(err.Error(), s.wantErr))) {
			t.Fatalf("%s: Reload got %v, want error %q", s.name, err, s.wantErr)
		}
		if got, err := healthSerial(tlsClient(t, addr, ca.PEM)); err != nil || got != s.wantSerial {
			t.Fatalf("%s: new connection got serial %q err %v, want %s", s.name, got, err, s.wantSerial)
		}
	}
	if strings.Count(logs.String(), "reload rejected") != 3 {
		t.Fatalf("want 3 rejected reloads logged, got:\n%s", logs)
	}
	if strings.Contains(logs.String(), "PRIVATE KEY") || strings.Contains(logs.String(), "BEGIN") {
		t.Fatalf("logs hold PEM material:\n%s", logs)
	}
}

func TestNewTLSConfigErrors(t *testing.T) {
	ca := newTestCA(t, "server CA")
	certFile, keyFile, _, _ := tlsFiles(t, ca, nil)
	dir := t.TempDir()
	emptyCA := filepath.Join(dir, "empty-ca.crt")
	writeAtomic(t, emptyCA, []byte("# no certificates\n"))
	tests := []struct {
		name                string
		cert, key, clientCA string
		want                string
	}{
		{"no key", certFile, "", "", "both a certificate and a key"},
		{"missing cert", filepath.Join(dir, "nope.crt"), keyFile, "", "no such file"},
		{"swapped", keyFile, certFile, "", "certificate and key"},
		{"empty client CA", certFile, keyFile, emptyCA, "no PEM certificates"},
		{"missing client CA", certFile, keyFile, filepath.Join(dir, "nope-ca.crt"), "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := auth.NewTLSConfig(t.Context(), auth.TLSFiles{Cert: tc.cert, Key: tc.key, ClientCA: tc.clientCA}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
