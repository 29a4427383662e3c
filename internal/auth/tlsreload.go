package auth

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// reloadInterval is how often, at most, a TLS config from NewTLSConfig
// or a TokenAuth re-reads its files to see whether they changed.
//
// Files are checked on use instead of watched: a TLS handshake (or an
// authenticated call) that finds reloadInterval passed since the last check
// re-reads the files and compares their contents with the last ones seen.
// Compared with an fsnotify watcher this needs no goroutine and nothing to
// close, follows Kubernetes secret updates (a "..data" symlink swapped to a
// new folder) and rename-based rotation without special cases, and cannot
// miss a change that keeps the size and modification time. The cost is one
// read of a few small files per reloadInterval, paid by the one caller that
// wins the check; concurrent callers never wait for it. A change is live for
// the first connection or call more than reloadInterval after it.
const reloadInterval = time.Second

// certReloader keeps the server certificate (and the client CA pool, for
// mTLS) in step with their files. newTLSConfig builds one.
//
// Reloads affect new handshakes only: connections already established keep
// the certificate they negotiated, so a rotation never drops a connection or
// a call. A new file that does not parse (or a key that does not match its
// certificate, as happens between the two writes of a rotation) is logged
// and ignored; the previous certificate keeps serving until the files are
// consistent again.
type certReloader struct {
	mTLS  bool
	files *fileReloader[tlsState]
}

// tlsState is one loaded generation of the TLS material.
type tlsState struct {
	cert *tls.Certificate
	cfg  *tls.Config // served to handshakes; never modified after load
}

// NewTLSConfig returns a TLS 1.2+ server config for the gRPC port whose
// certificate comes from certFile and keyFile (PEM), re-read when they
// change (see reloadInterval). When clientCAFile is not empty, clients must
// present a certificate signed by one of the CAs in it (mTLS,
// tls.RequireAndVerifyClientCert); that file is reloaded the same way.
//
// Use it with grpc's credentials.NewTLS, which keeps GetConfigForClient
// (and adds the "h2" ALPN protocol to what it returns). It fails when the
// files cannot be loaded now. log receives reloads and rejected files (never
// their contents); nil means slog.Default().
//
// Treat the returned config as read-only: each handshake gets a config built
// from the files (TLS 1.2+, the certificate, the client CAs), so fields set
// on the returned one later do not apply.
func NewTLSConfig(certFile, keyFile, clientCAFile string, log *slog.Logger) (*tls.Config, error) {
	cfg, _, err := newTLSConfig(certFile, keyFile, clientCAFile, log)
	return cfg, err
}

// newTLSConfig is NewTLSConfig, also returning the reloader behind the
// config (which tests inspect).
func newTLSConfig(certFile, keyFile, clientCAFile string, log *slog.Logger) (*tls.Config, *certReloader, error) {
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
	r := &certReloader{mTLS: mTLS}
	r.files = newFileReloader("tls certificate", paths, log, parseTLS, func(st *tlsState) []any {
		leaf := st.cert.Leaf
		attrs := []any{"cert", certFile, "subject", leaf.Subject.String(), "serial", leaf.SerialNumber.String(),
			"not_after", leaf.NotAfter.UTC().Format(time.RFC3339)}
		if mTLS {
			attrs = append(attrs, "client_ca", clientCAFile)
		}
		return attrs
	})
	if err := r.files.Reload(time.Now()); err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.files.Get(time.Now()).cert, nil
		},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.files.Get(time.Now()).cfg, nil
		},
	}
	if mTLS {
		// Also on the outer config, so it reads right when inspected; the
		// per-handshake config returned above is what applies.
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = r.files.Get(time.Now()).cfg.ClientCAs
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
func (r *certReloader) Reload() error { return r.files.Reload(time.Now()) }

// Certificate returns the certificate new handshakes get, as checked at the
// last reload (it does not look at the files).
func (r *certReloader) Certificate() *x509.Certificate { return r.files.Current().cert.Leaf }

// MutualTLS reports whether clients must present a certificate.
func (r *certReloader) MutualTLS() bool { return r.mTLS }

// fileReloader holds a value parsed from a set of files and re-parses it
// when their contents change, checking at most once per reloadInterval.
// Shared by certReloader and TokenAuth.
type fileReloader[T any] struct {
	name     string // for logs: "tls certificate", "auth tokens"
	paths    []string
	log      *slog.Logger
	parse    func(contents [][]byte) (*T, error)
	describe func(*T) []any // log attributes of a loaded value; no secrets
	interval time.Duration

	cur  atomic.Pointer[T]
	next atomic.Int64 // Unix ns before which Get does not check the files

	mu      sync.Mutex // serializes reloads
	digest  [sha256.Size]byte
	lastErr string // last error logged, so a persisting one is logged once
}

func newFileReloader[T any](name string, paths []string, log *slog.Logger, parse func([][]byte) (*T, error), describe func(*T) []any) *fileReloader[T] {
	return &fileReloader[T]{name: name, paths: paths, log: log, parse: parse, describe: describe, interval: reloadInterval}
}

// Current returns the loaded value without checking the files.
func (f *fileReloader[T]) Current() *T { return f.cur.Load() }

// Get returns the loaded value, first reloading it if the interval passed
// and the files changed. Only one caller checks; the others never wait.
func (f *fileReloader[T]) Get(now time.Time) *T {
	if next := f.next.Load(); now.UnixNano() >= next && f.next.CompareAndSwap(next, now.Add(f.interval).UnixNano()) {
		_ = f.reload(now, false)
	}
	return f.cur.Load()
}

// Reload re-reads and re-parses the files even if they look unchanged.
func (f *fileReloader[T]) Reload(now time.Time) error {
	return f.reload(now, true)
}

func (f *fileReloader[T]) reload(now time.Time, force bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next.Store(now.Add(f.interval).UnixNano())
	contents := make([][]byte, len(f.paths))
	h := sha256.New()
	for i, p := range f.paths {
		b, err := os.ReadFile(p)
		if err != nil {
			// Not recorded in the digest: a missing file (mid-swap) is
			// retried at the next check.
			return f.fail(fmt.Errorf("%s: %w", f.name, err))
		}
		contents[i] = b
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	var digest [sha256.Size]byte
	h.Sum(digest[:0])
	if !force && digest == f.digest && f.cur.Load() != nil {
		return nil
	}
	f.digest = digest
	v, err := f.parse(contents)
	if err != nil {
		return f.fail(fmt.Errorf("%s from %s: %w", f.name, f.paths[0], err))
	}
	msg := f.name + " reloaded"
	if f.cur.Swap(v) == nil {
		msg = f.name + " loaded"
	}
	f.lastErr = ""
	f.log.Info(msg, f.describe(v)...)
	return nil
}

// fail logs err once while it persists, unless nothing is loaded yet (the
// constructor returns it instead), and returns it.
func (f *fileReloader[T]) fail(err error) error {
	if f.cur.Load() != nil && err.Error() != f.lastErr {
		f.lastErr = err.Error()
		f.log.Error(f.name+" reload rejected; the previous one keeps serving", "err", err)
	}
	return err
}
