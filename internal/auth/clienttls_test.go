package auth_test

import (
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/testkit/testpki"
)

// TestClientTLS: a CA replaces the system roots and a certificate with
// its key is the client's; every refusal names the file as the caller
// calls it.
func TestClientTLS(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	dir := t.TempDir()
	cert, key, _ := ca.Issue(t, "client", false)
	caFile := testpki.WriteFile(t, dir, "ca.pem", ca.PEM)
	certFile := testpki.WriteFile(t, dir, "cert.pem", cert)
	keyFile := testpki.WriteFile(t, dir, "key.pem", key)
	names := auth.ClientFiles{CA: "--ca", Cert: "--cert", Key: "--key"}

	cfg, err := auth.ClientTLS(auth.ClientFiles{CA: caFile, Cert: certFile, Key: keyFile}, names)
	if err != nil || cfg.RootCAs == nil || len(cfg.Certificates) != 1 {
		t.Fatalf("CA and certificate: %v, %v", cfg, err)
	}
	if cfg, err := auth.ClientTLS(auth.ClientFiles{}, names); err != nil || cfg.RootCAs != nil || len(cfg.Certificates) != 0 {
		t.Fatalf("no files: %v, %v; want the system roots, no certificate", cfg, err)
	}
	for _, tc := range []struct {
		name  string
		files auth.ClientFiles
		want  string
	}{
		{"missing CA", auth.ClientFiles{CA: dir + "/none.pem"}, "--ca: open "},
		{"not a certificate", auth.ClientFiles{CA: testpki.WriteFile(t, dir, "junk.pem", []byte("junk"))}, "--ca: no PEM certificate in "},
		{"certificate without key", auth.ClientFiles{Cert: certFile}, "--cert and --key go together"},
		{"key without certificate", auth.ClientFiles{Key: keyFile}, "--cert and --key go together"},
		{"mismatched pair", auth.ClientFiles{Cert: certFile, Key: caFile}, "--cert: "},
	} {
		if _, err := auth.ClientTLS(tc.files, names); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}
