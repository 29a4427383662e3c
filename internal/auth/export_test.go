package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"

	"github.com/floodgate/floodgate/internal/filewatch"
)

// certReloader is the watcher behind a TLS config, for the external
// tests, which check its view of the files.
type certReloader struct{ *filewatch.Watcher[tlsState] }

// NewTLSConfigWithReloader is NewTLSConfig with the reloader behind the
// config.
func NewTLSConfigWithReloader(ctx context.Context, tf TLSFiles, log *slog.Logger) (*tls.Config, certReloader, error) {
	cfg, r, err := NewTLSConfig(ctx, tf, log)
	if err != nil {
		return nil, certReloader{}, err
	}
	return cfg, certReloader{r.(*filewatch.Watcher[tlsState])}, nil
}

// Tokens returns how many tokens, and how many admin tokens, are in force.
func (t *TokenAuth) Tokens() (total, admins int) {
	ts := t.files.Current()
	return len(ts.digests), ts.admins
}

// Certificate returns the certificate new handshakes get, as loaded at the
// last reload (it does not look at the files).
func (r certReloader) Certificate() *x509.Certificate { return r.Current().cert.Leaf }

// MutualTLS reports whether clients must present a certificate.
func (r certReloader) MutualTLS() bool {
	return r.Current().cfg.ClientAuth == tls.RequireAndVerifyClientCert
}
