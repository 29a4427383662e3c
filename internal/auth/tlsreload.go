package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/floodgate/floodgate/internal/filewatch"
)

// certReloader keeps the server certificate (and the client CA pool, for
// mTLS) in step with their files, watched as internal/filewatch watches
// every file-backed setting. NewTLSConfig builds one.
//
// Reloads affect new handshakes only: connections already established keep
// the certificate they negotiated, so a rotation never drops a connection or
// a call. A new file that does not parse (or a key that does not match its
// certificate, as happens between the two writes of a rotation) is logged
// and ignored; the previous certificate keeps serving until the files are
// consistent again.
type certReloader struct {
	files *filewatch.Watcher[tlsState]
}

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

// NewTLSConfig returns a TLS 1.2+ server config for the gRPC port whose
// certificate comes from files.Cert and files.Key, reloaded when they
// change (by internal/filewatch, rename-based rotation and Kubernetes
// Secret updates included) until ctx ends or the returned io.Closer is
// closed. When files.ClientCA is not empty, clients must present a
// certificate signed by one of the CAs in it (mTLS,
// tls.RequireAndVerifyClientCert); that file is reloaded the same way.
//
// Use it with grpc's credentials.NewTLS, which keeps GetConfigForClient
// (and adds the "h2" ALPN protocol to what it returns). It fails when the
// files cannot be loaded now. log receives reloads and rejected files (never
// their contents); nil means slog.Default().
//
// Treat the returned config as read-only: each handshake gets a config built
// from the files (TLS 1.2+, the certificate, the client CAs), so fields set
// on the returned one later do not apply. After Close it keeps serving the
// last certificate loaded.
func NewTLSConfig(ctx context.Context, tf TLSFiles, log *slog.Logger) (*tls.Config, Reloader, error) {
	certFile, keyFile, clientCAFile := tf.Cert, tf.Key, tf.ClientCA
	if certFile == "" || keyFile == "" {
		return nil, nil, errors.New("tls: both a certificate and a key file are needed")
	}
	if log == nil {
		log = slog.Default()
	}
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
	r := &certReloader{files: files}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.files.Current().cert, nil
		},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.files.Current().cfg, nil
		},
	}
	if mTLS {
		// Also on the outer config, so it reads right when inspected; the
		// per-handshake config returned above is what applies.
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = r.files.Current().cfg.ClientCAs
	}
	return cfg, r, nil
}

// parseTLS loads a certificate, its key and, when present, a client CA
// bundle. Errors name the part that failed, never its contents.
func parseTLS(contents [][]byte) (*tlsState, error) {
	cert, err := tls.X509KeyPair(contents[0], contents[1])
	if err != nil {
		return nil, fmt.Errorf("certificate and key: %w", err)
	}
	// cert.Leaf is set by X509KeyPair since Go 1.23.
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("certificate: %w", err)
		}
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

// Reload re-reads the files now, whether or not they changed (for SIGHUP).
// On error the previous certificate keeps serving.
func (r *certReloader) Reload() error { return r.files.Reload() }

// Close stops watching the files; handshakes keep the last certificate.
func (r *certReloader) Close() error { return r.files.Close() }
