package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

// testPKI is a private CA made by the test, with a server certificate for
// 127.0.0.1 and a client certificate, as PEM files.
type testPKI struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	OtherCA                                          string // a CA that signed nothing here
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	key := func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := int64(1)
	cert := func(tmpl *x509.Certificate, parent *x509.Certificate, pub *rsa.PublicKey, signer *rsa.PrivateKey) (*x509.Certificate, []byte) {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore = time.Now().Add(-time.Hour)
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c, der
	}
	newCA := func(name string) (*x509.Certificate, *rsa.PrivateKey, []byte) {
		k := key()
		c, der := cert(&x509.Certificate{Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}, nil, &k.PublicKey, k)
		return c, k, der
	}
	caCert, caKey, caDER := newCA("rdmawatch test CA")
	_, _, otherDER := newCA("another CA")
	sk, ck := key(), key()
	_, serverDER := cert(&x509.Certificate{Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames: []string{"localhost"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}, caCert, &sk.PublicKey, caKey)
	_, clientDER := cert(&x509.Certificate{Subject: pkix.Name{CommonName: "rdmawatch-collector"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}, caCert, &ck.PublicKey, caKey)
	return testPKI{
		CA:         write("ca.pem", "CERTIFICATE", caDER),
		OtherCA:    write("other-ca.pem", "CERTIFICATE", otherDER),
		ServerCert: write("server.pem", "CERTIFICATE", serverDER),
		ServerKey:  write("server-key.pem", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sk)),
		ClientCert: write("client.pem", "CERTIFICATE", clientDER),
		ClientKey:  write("client-key.pem", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(ck)),
	}
}

// TestSecurityNATSTLSAndNKey: the admin step (the same connection code as
// every role) reaches a nats-server that requires TLS with verified client
// certificates, by flags and by environment, and one that requires an nkey
// user; without the right material it is refused.
func TestSecurityNATSTLSAndNKey(t *testing.T) {
	pki := newTestPKI(t)
	startNATS(t, 14540, fmt.Sprintf(`jetstream { store_dir: %%STORE%% }
tls { cert_file: %q, key_file: %q, ca_file: %q, verify: true, timeout: 5 }
`, pki.ServerCert, pki.ServerKey, pki.CA), nil)
	url := "tls://127.0.0.1:14540"
	if out := mustRun(t, nil, "streams", "apply", "--nats", url, "--nats-tls-ca", pki.CA, "--nats-tls-cert", pki.ClientCert, "--nats-tls-key", pki.ClientKey); !strings.Contains(out, "created") {
		t.Fatalf("streams apply over TLS:\n%s", out)
	}
	mustRun(t, []string{"RDMAWATCH_NATS=" + url, "RDMAWATCH_NATS_TLS_CA=" + pki.CA, "RDMAWATCH_NATS_TLS_CERT=" + pki.ClientCert, "RDMAWATCH_NATS_TLS_KEY=" + pki.ClientKey}, "streams", "check")
	// A role over TLS, with a client certificate, from the environment.
	collector := startRole(t, "collector", []string{"RDMAWATCH_NATS=" + url, "RDMAWATCH_NATS_TLS_CA=" + pki.CA, "RDMAWATCH_NATS_TLS_CERT=" + pki.ClientCert, "RDMAWATCH_NATS_TLS_KEY=" + pki.ClientKey},
		"collector", "--source", "sim", "--sim-nodes", "1", "--speed", "60")
	collector.waitLog("simulated collectors started", 30*time.Second)
	collector.stop()
	for name, args := range map[string][]string{
		"no client certificate":  {"--nats-tls-ca", pki.CA},
		"server from another CA": {"--nats-tls-ca", pki.OtherCA, "--nats-tls-cert", pki.ClientCert, "--nats-tls-key", pki.ClientKey},
		"no CA":                  {"--nats-tls-cert", pki.ClientCert, "--nats-tls-key", pki.ClientKey},
		"certificate, no key":    {"--nats-tls-ca", pki.CA, "--nats-tls-cert", pki.ClientCert},
	} {
		if out, code := runOnce(t, nil, append([]string{"streams", "check", "--nats", url}, args...)...); code == 0 {
			t.Errorf("%s: streams check succeeded:\n%s", name, out)
		}
	}

	// nkey.
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	otherFile := filepath.Join(t.TempDir(), "other.nk")
	if err := os.WriteFile(otherFile, otherSeed, 0o600); err != nil {
		t.Fatal(err)
	}
	startNATS(t, 14541, fmt.Sprintf("jetstream { store_dir: %%STORE%% }\nauthorization { users = [ { nkey: %q } ] }\n", pub), nil)
	nkURL := "nats://127.0.0.1:14541"
	mustRun(t, nil, "streams", "apply", "--nats", nkURL, "--nats-nkey", seedFile)
	mustRun(t, []string{"RDMAWATCH_NATS=" + nkURL, "RDMAWATCH_NATS_NKEY=" + seedFile}, "streams", "check")
	for name, args := range map[string][]string{"no nkey": nil, "another nkey": {"--nats-nkey", otherFile}} {
		out, code := runOnce(t, nil, append([]string{"streams", "check", "--nats", nkURL}, args...)...)
		if code == 0 {
			t.Errorf("%s: streams check succeeded:\n%s", name, out)
		} else if !strings.Contains(strings.ToLower(out), "authorization") {
			t.Errorf("%s: refusal does not say authorization:\n%s", name, out)
		}
	}
}

// TestSecurityClickHouseTLS: a private ClickHouse (Debian's 18.16 here)
// with tcp_port_secure and the test's certificate is reached with
// ?secure=true and --clickhouse-tls-ca, by migrate, sink-style inserts and
// query; without the CA the certificate is refused.
func TestSecurityClickHouseTLS(t *testing.T) {
	pki := newTestPKI(t)
	const tcp, http, secure = 14584, 14585, 14586
	privateClickHouse(t, tcp, http, fmt.Sprintf("RDMAWATCH_CH_TLS_PORT=%d", secure),
		"RDMAWATCH_CH_TLS_CERT="+pki.ServerCert, "RDMAWATCH_CH_TLS_KEY="+pki.ServerKey)
	dsn := fmt.Sprintf("clickhouse://127.0.0.1:%d/rdmawatch?secure=true", secure)
	if out := mustRun(t, nil, "migrate", "--clickhouse", dsn, "--clickhouse-tls-ca", pki.CA); !strings.Contains(out, "applied") {
		t.Fatalf("migrate over TLS:\n%s", out)
	}
	mustRun(t, []string{"RDMAWATCH_CLICKHOUSE=" + dsn, "RDMAWATCH_CLICKHOUSE_TLS_CA=" + pki.CA}, "query", "events", "--from", "1h")
	for name, args := range map[string][]string{
		"system CAs only":        {"--clickhouse", dsn},
		"another CA":             {"--clickhouse", dsn, "--clickhouse-tls-ca", pki.OtherCA},
		"CA without secure=true": {"--clickhouse", strings.TrimSuffix(dsn, "?secure=true"), "--clickhouse-tls-ca", pki.CA},
	} {
		out, code := runOnce(t, nil, append([]string{"query", "events", "--from", "1h"}, args...)...)
		if code == 0 {
			t.Errorf("%s: query succeeded:\n%s", name, out)
		}
	}
}
