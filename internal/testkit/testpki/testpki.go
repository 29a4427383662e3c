// Package testpki makes certificates for tests: a certificate authority
// per test, and server and client certificates it signs. Keys are ECDSA
// P-256; certificates are valid from an hour ago to an hour from now.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	// Cert is the CA's certificate, PEM its PEM encoding (a CA file).
	Cert *x509.Certificate
	PEM  []byte
	key  *ecdsa.PrivateKey
}

// serial is a random certificate serial number.
func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// template is a certificate for name with a random serial number, valid
// from an hour ago to an hour from now.
func template(t testing.TB, name string) *x509.Certificate {
	t.Helper()
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(time.Hour),
	}
}

// sign makes tmpl a certificate of key, signed by issuer (its certificate
// and key; a CA being made signs itself without its PEM), and
// returns its DER encoding.
func sign(t testing.TB, tmpl *x509.Certificate, key *ecdsa.PrivateKey, issuer *CA) []byte {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer.Cert, &key.PublicKey, issuer.key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// NewCA creates a self-signed CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, name)
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der := sign(t, tmpl, key, &CA{Cert: tmpl, key: key}) // self-signed
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Pool is a pool holding only the CA, for RootCAs or ClientCAs.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue signs a certificate for name: a server certificate for 127.0.0.1
// and localhost, or a client certificate. It returns the PEM certificate,
// the PEM (PKCS #8) key and the certificate's serial number.
func (ca *CA) Issue(t testing.TB, name string, server bool) (certPEM, keyPEM []byte, serialNumber string) {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	}
	der := sign(t, tmpl, key, ca)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		tmpl.SerialNumber.String()
}

// WriteFile writes data to name in dir (mode 0600) and returns the path.
func WriteFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
