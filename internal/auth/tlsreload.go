package auth

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// tlsState is one loaded generation of the TLS material.
type tlsState struct {
	cert *tls.Certificate
	cfg  *tls.Config // served to handshakes; never modified after load
}

// TLSFiles are the PEM files of a TLS server: its certificate and key,
// and the CAs its clients' certificates must be signed by ("": no client
// certificate asked for).
type TLSFiles struct {
	Cert, Key, ClientCA string
}

// Reloader is a watcher of files: Reload loads them now, whether or not
// they changed (for a SIGHUP; a failure keeps what was loaded before and
// is returned), Close stops watching.
type Reloader interface {
	io.Closer
	Reload() error
}

// NewTLSConfig returns a TLS 1.2+ server config whose certificate comes
// from files, reloaded when they change until ctx ends or the returned
// Reloader is closed; with files.ClientCA, clients must present a
// certificate it signed (mTLS). Use it with grpc's credentials.NewTLS. It
// fails when the files cannot be loaded now; log (nil: slog.Default())
// receives reloads and rejected files (logged and ignored, as between the
// two writes of a rotation), never their contents. Treat the config as
// read-only: each handshake gets one built from the files, so a rotation
// drops no connection. Closing the Reloader keeps the last certificate.
func NewTLSConfig(ctx context.Context, tf TLSFiles, log *slog.Logger) (*tls.Config, Reloader, error) {
	certFile, keyFile, clientCAFile := tf.Cert, tf.Key, tf.ClientCA
	if certFile == "" || keyFile == "" {
		return nil, nil, errors.New("tls: both a certificate and a key file are needed")
	}
	log = cmp.Or(log, slog.Default())
	paths := []string{certFile, keyFile}
	mTLS := clientCAFile != ""
	if mTLS {
		paths = append(paths, clientCAFile)
	}
	files, err := fileSet[tlsState]{name: "tls certificate", paths: paths, parse: parseTLS, describe: func(st *tlsState) []any {
		leaf := st.cert.Leaf
		attrs := []any{"cert", certFile, "subject", leaf.Subject.String(), "serial", leaf.SerialNumber.String(),
			"not_after", leaf.NotAfter.UTC().Format(time.RFC3339)}
		if mTLS {
			attrs = append(attrs, "client_ca", clientCAFile)
		}
		return attrs
	}}.watch(ctx, log)
	if err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return files.Current().cert, nil
		},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return files.Current().cfg, nil
		},
	}
	if mTLS {
		// Also on the outer config, so it reads right when inspected; the
		// per-handshake config returned above is what applies.
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = files.Current().cfg.ClientCAs
	}
	return cfg, files, nil
}

// parseTLS loads a certificate, its key and, when present, a client CA
// bundle. Errors name the part that failed, never its contents.
func parseTLS(contents [][]byte) (*tlsState, error) {
	cert, err := tls.X509KeyPair(contents[0], contents[1])
	if err != nil {
		return nil, fmt.Errorf("certificate and key: %w", err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
	}
	if len(contents) > 2 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(contents[2]) {
			return nil, errors.New("client CA file: no PEM certificates found")
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return &tlsState{cert: &cert, cfg: cfg}, nil
}
