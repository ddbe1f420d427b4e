//go:build realserver

package temporalconn_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"karvi-edda-temporal/internal/temporalconn"
	"karvi-edda-temporal/testkit/devenv"
)

// serverName is the only name in the proxy's certificate: a client that
// does not use TEMPORAL_TLS_SERVER_NAME (it dials 127.0.0.1) cannot verify it.
const serverName = "temporal.karvi-edda.test"

// The TLS settings of the profile file and of the environment are read
// and used: through a TLS-terminating proxy in front of a dev server, a
// client configured only by them makes real calls, and fails with a TLS
// error when the CA, the server name or the client certificate is missing.
func TestTLSThroughProfileAndEnvironment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := devenv.StartServer(ctx, devenv.ServerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })

	pki := newPKI(t)
	tlsProxy := startTLSProxy(t, srv.Addr, pki.serverConfig(false))
	mtlsProxy := startTLSProxy(t, srv.Addr, pki.serverConfig(true))
	noFile := filepath.Join(t.TempDir(), "none.toml")

	dial := func(t *testing.T, f temporalconn.Flags) error {
		t.Helper()
		cfg, err := temporalconn.Load(f)
		require.NoError(t, err)
		require.True(t, cfg.TLS())
		dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		cl, err := cfg.Dial(dctx, temporalconn.ErrorLogger(io.Discard))
		if err != nil {
			return err
		}
		defer cl.Close()
		resp, err := cl.WorkflowService().DescribeNamespace(dctx,
			&workflowservice.DescribeNamespaceRequest{Namespace: cfg.Options.Namespace})
		require.NoError(t, err)
		require.Equal(t, "default", resp.GetNamespaceInfo().GetName())
		return nil
	}

	t.Run("environment", func(t *testing.T) {
		isolate(t, "TEMPORAL_CONFIG_FILE", noFile,
			"TEMPORAL_ADDRESS", tlsProxy,
			"TEMPORAL_TLS_SERVER_CA_CERT_PATH", pki.caPath,
			"TEMPORAL_TLS_SERVER_NAME", serverName)
		require.NoError(t, dial(t, temporalconn.Flags{}))
	})
	t.Run("environment without the CA", func(t *testing.T) {
		isolate(t, "TEMPORAL_CONFIG_FILE", noFile,
			"TEMPORAL_ADDRESS", tlsProxy,
			"TEMPORAL_TLS", "true",
			"TEMPORAL_TLS_SERVER_NAME", serverName)
		err := dial(t, temporalconn.Flags{})
		require.ErrorContains(t, err, "x509: certificate signed by unknown authority")
	})
	t.Run("environment without the server name", func(t *testing.T) {
		isolate(t, "TEMPORAL_CONFIG_FILE", noFile,
			"TEMPORAL_ADDRESS", tlsProxy,
			"TEMPORAL_TLS_SERVER_CA_CERT_PATH", pki.caPath)
		err := dial(t, temporalconn.Flags{})
		require.ErrorContains(t, err, "x509: cannot validate certificate for 127.0.0.1")
	})

	profile := filepath.Join(t.TempDir(), "temporal.toml")
	require.NoError(t, os.WriteFile(profile, []byte(`
[profile.secure]
address = "`+mtlsProxy+`"
namespace = "default"
[profile.secure.tls]
server_ca_cert_path = "`+pki.caPath+`"
server_name = "`+serverName+`"
client_cert_path = "`+pki.clientCertPath+`"
client_key_path = "`+pki.clientKeyPath+`"

[profile.nocert]
address = "`+mtlsProxy+`"
[profile.nocert.tls]
server_ca_cert_path = "`+pki.caPath+`"
server_name = "`+serverName+`"
`), 0o600))

	t.Run("profile with a client certificate", func(t *testing.T) {
		isolate(t, "TEMPORAL_CONFIG_FILE", profile, "TEMPORAL_PROFILE", "secure")
		require.NoError(t, dial(t, temporalconn.Flags{}))
	})
	t.Run("profile without the client certificate", func(t *testing.T) {
		isolate(t, "TEMPORAL_CONFIG_FILE", profile, "TEMPORAL_PROFILE", "nocert")
		err := dial(t, temporalconn.Flags{})
		require.ErrorContains(t, err, "tls: certificate required")
	})
	t.Run("-address keeps the profile's TLS", func(t *testing.T) {
		isolate(t, "TEMPORAL_CONFIG_FILE", profile, "TEMPORAL_PROFILE", "nocert")
		require.NoError(t, dial(t, temporalconn.Flags{Address: tlsProxy}))
	})

	// The starter binary dials through the same settings: it reaches the
	// server (which knows no such task) with them, and fails TLS without.
	t.Run("starter binary", func(t *testing.T) {
		starter, err := devenv.Binary("starter")
		require.NoError(t, err)
		env := append(cleanEnviron(), "TEMPORAL_CONFIG_FILE="+noFile, "TEMPORAL_TLS_SERVER_NAME="+serverName)
		for _, c := range []struct{ ca, want string }{
			{"TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + pki.caPath, "workflow not found"},
			{"TEMPORAL_TLS=1", "x509: certificate signed by unknown authority"},
		} {
			cmd := exec.CommandContext(ctx, starter, "status", "-address", tlsProxy, "NO-SUCH-TASK")
			cmd.Env = append(env, c.ca)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "%v: %s", err, out)
			require.Equal(t, 1, exit.ExitCode(), "%s", out)
			require.Contains(t, string(out), c.want)
		}
	})
}

// envconfigVars are the variables envconfig reads; a test unsets the
// developer's own so that only its settings count.
func isEnvconfigVar(name string) bool {
	return strings.HasPrefix(name, "TEMPORAL_") && name != "TEMPORAL_CLI"
}

// isolate sets kv and unsets every other envconfig variable for t.
func isolate(t *testing.T, kv ...string) {
	t.Helper()
	for _, e := range os.Environ() {
		name, _, _ := strings.Cut(e, "=")
		if isEnvconfigVar(name) {
			t.Setenv(name, "") // restores the value after t
			require.NoError(t, os.Unsetenv(name))
		}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}

func cleanEnviron() []string {
	var out []string
	for _, e := range os.Environ() {
		if name, _, _ := strings.Cut(e, "="); !isEnvconfigVar(name) {
			out = append(out, e)
		}
	}
	return out
}

// pki is a throwaway CA, a server certificate for serverName only, and a
// client certificate, written as PEM files.
type pki struct {
	ca                            *x509.Certificate
	caKey                         *ecdsa.PrivateKey
	server                        tls.Certificate
	caPath                        string
	clientCertPath, clientKeyPath string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	p := &pki{}
	var caDER []byte
	p.caKey, caDER = issue(t, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "karvi-edda test CA"},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}, nil, nil)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	p.ca = ca
	p.caPath = writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)

	serverKey, serverDER := issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: serverName},
		DNSNames:    []string{serverName},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, p.ca, p.caKey)
	p.server = tls.Certificate{Certificate: [][]byte{serverDER}, PrivateKey: serverKey}

	clientKey, clientDER := issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "karvi-edda worker"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, p.ca, p.caKey)
	p.clientCertPath = writePEM(t, dir, "client.pem", "CERTIFICATE", clientDER)
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	require.NoError(t, err)
	p.clientKeyPath = writePEM(t, dir, "client.key", "EC PRIVATE KEY", keyDER)
	return p
}

// issue makes a key and a certificate for tmpl, signed by parent (self-signed
// when parent is nil).
func issue(t *testing.T, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	require.NoError(t, err)
	return key, der
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return path
}

func (p *pki) serverConfig(requireClientCert bool) *tls.Config {
	c := &tls.Config{
		Certificates: []tls.Certificate{p.server},
		// gRPC clients insist on ALPN h2; behind the proxy the dev server
		// speaks plaintext HTTP/2.
		NextProtos: []string{"h2"},
		MinVersion: tls.VersionTLS12,
	}
	if requireClientCert {
		pool := x509.NewCertPool()
		pool.AddCert(p.ca)
		c.ClientCAs = pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c
}

// startTLSProxy terminates TLS on a loopback port and forwards the bytes to
// backend, as a TLS-fronted cluster would. It returns the proxy's address.
func startTLSProxy(t *testing.T, backend string, conf *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", conf)
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			front, err := ln.Accept()
			if err != nil {
				return
			}
			track(front)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer front.Close()
				tc := front.(*tls.Conn)
				if err := tc.Handshake(); err != nil {
					// Read on until the client hangs up: closing now could
					// reset the connection before the client reads the alert,
					// and it would see a broken pipe instead of the TLS error.
					_, _ = io.Copy(io.Discard, tc.NetConn())
					return
				}
				back, err := net.Dial("tcp", backend)
				if err != nil {
					return
				}
				track(back)
				defer back.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(back, front); done <- struct{}{} }()
				go func() { _, _ = io.Copy(front, back); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
