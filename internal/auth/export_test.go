package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
)

// NewTLSConfigWithReloader is NewTLSConfig with the reloader behind the
// config, for the external tests, which check its view of the files.
func NewTLSConfigWithReloader(ctx context.Context, tf TLSFiles, log *slog.Logger) (*tls.Config, *certReloader, error) {
	cfg, r, err := NewTLSConfig(ctx, tf, log)
	if err != nil {
		return nil, nil, err
	}
	return cfg, r.(*certReloader), nil
}

// Tokens returns how many tokens, and how many admin tokens, are in force.
func (t *TokenAuth) Tokens() (total, admins int) {
	ts := t.files.Current()
	return len(ts.digests), ts.admins
}

// Certificate returns the certificate new handshakes get, as loaded at the
// last reload (it does not look at the files).
func (r *certReloader) Certificate() *x509.Certificate { return r.files.Current().cert.Leaf }

// MutualTLS reports whether clients must present a certificate.
func (r *certReloader) MutualTLS() bool {
	return r.files.Current().cfg.ClientAuth == tls.RequireAndVerifyClientCert
}
