package auth

import (
	"crypto/tls"
	"crypto/x509"
)

// NewTLSConfigWithReloader exposes newTLSConfig to the external tests,
// which check the reloader's view of the files.
var NewTLSConfigWithReloader = newTLSConfig

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
