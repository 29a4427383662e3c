package auth

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// ClientFiles are the files of a client's TLS config: CA (PEM), when not
// empty, replaces the system roots; Cert and Key, which go together, are
// the client certificate for mutual TLS.
type ClientFiles struct{ CA, Cert, Key string }

// ClientTLS is the client TLS config of files (TLS 1.2 at least). Its
// errors call each file as names does (a flag, say).
func ClientTLS(files, names ClientFiles) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if files.CA != "" {
		pem, err := os.ReadFile(files.CA)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names.CA, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate in %s", names.CA, files.CA)
		}
	}
	if (files.Cert == "") != (files.Key == "") {
		return nil, fmt.Errorf("%s and %s go together", names.Cert, names.Key)
	}
	if files.Cert != "" {
		cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names.Cert, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
