package gatewayd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With -tls-cert and -tls-key the local API serves HTTPS: a client that trusts the
// certificate gets its answers; plain HTTP to the port gets none.
func TestRunServesTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gateway"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile := filepath.Join(dir, "gw.crt"), filepath.Join(dir, "gw.key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))

	layoutPath := kerongLayout(t, "kerong+tcp://127.0.0.1:1?board=1")
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(t.Context(), []string{"-addr", "127.0.0.1:0", "-secret", goodSecret, "-layout", layoutPath,
			"-db", filepath.Join(dir, "gw.db"), "-tls-cert", certFile, "-tls-key", keyFile, "-controller-latency", "0s"},
			env(nil), io.Discard, func(a string) { addrc <- a })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("run returned early: %v", err)
	}
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+addr+"/system", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+goodSecret)
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	plain, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/healthz")
	if err == nil {
		plain.Body.Close()
		assert.NotEqual(t, http.StatusOK, plain.StatusCode, "plain HTTP is not served")
	}

	err = run(t.Context(), []string{"-simulated", "-secret", goodSecret, "-tls-cert", certFile}, env(nil), io.Discard, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "together")
}
