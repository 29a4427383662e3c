package redisstore_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/internal/testkit/testpki"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
)

// TestTLS: rediss:// with a private CA (--redis-tls-ca) and a client
// certificate Redis requires (--redis-tls-cert/--redis-tls-key) decides on
// a TLS-only port; without the CA the handshake fails and the error is
// "unavailable"; TLS files with redis:// are refused.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "floodgate test CA")
	testpki.WriteFile(t, dir, "ca.crt", ca.PEM)
	c, k, _ := ca.Issue(t, "redis", true)
	testpki.WriteFile(t, dir, "server.crt", c)
	testpki.WriteFile(t, dir, "server.key", k)
	c, k, _ = ca.Issue(t, "floodgate", false)
	testpki.WriteFile(t, dir, "client.crt", c)
	testpki.WriteFile(t, dir, "client.key", k)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	redistest.StartServer(t, "--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", filepath.Join(dir, "server.crt"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.crt"), "--tls-auth-clients", "yes")
	url := "rediss://127.0.0.1:" + strconv.Itoa(tlsPort)

	client, err := redisstore.NewClient(redisstore.ClientConfig{
		URL: url, TLSCAFile: filepath.Join(dir, "ca.crt"),
		TLSCertFile: filepath.Join(dir, "client.crt"), TLSKeyFile: filepath.Join(dir, "client.key"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	s := newStore(t, client, redisstore.Config{Timeout: 5 * time.Second})
	defer s.Close()
	lim := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1, Period: time.Hour}
	out := make([]algorithms.Decision, 1)
	for i, want := range []bool{true, false} {
		if err := s.Decide(context.Background(), time.Now(), []store.Request{{Key: "tls", Limit: lim, Cost: 1}}, out); err != nil {
			t.Fatalf("decide %d over TLS: %v", i, err)
		}
		if out[0].Allowed != want {
			t.Fatalf("decide %d: allowed %v, want %v", i, out[0].Allowed, want)
		}
	}

	// Without the private CA, the server's certificate is not trusted.
	untrusting, err := redisstore.NewClient(redisstore.ClientConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer untrusting.Close()
	s2 := newStore(t, untrusting, redisstore.Config{Timeout: 2 * time.Second})
	defer s2.Close()
	if err := s2.Ping(context.Background()); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("ping without the CA: got %v, want an unavailable error", err)
	}

	if _, err := redisstore.NewClient(redisstore.ClientConfig{URL: "redis://127.0.0.1:1", TLSCAFile: "ca.crt"}); !errors.Is(err, redisstore.ErrClientConfig) {
		t.Fatalf("TLS files with redis://: got %v, want ErrClientConfig", err)
	}
	if _, err := redisstore.NewClient(redisstore.ClientConfig{URL: url, TLSCertFile: "client.crt"}); !errors.Is(err, redisstore.ErrClientConfig) {
		t.Fatalf("a client certificate without its key: got %v, want ErrClientConfig", err)
	}
}
