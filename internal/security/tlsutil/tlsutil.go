// Package tlsutil holds the TLS file settings of the configuration (a
// listener's, a client's) and turns them into crypto/tls configurations for
// the admin gRPC API and its clients. The settings live here, not in
// config, so that components taking them (the embedded etcd) need not
// import the configuration that composes theirs.
package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// ClientTLS configures a TLS client (the etcd client, schedctl).
type ClientTLS struct {
	CAFile     string `yaml:"ca_file"`
	CertFile   string `yaml:"cert_file"` // client certificate, for servers that require one
	KeyFile    string `yaml:"key_file"`
	ServerName string `yaml:"server_name"`
}

// Enabled reports whether any TLS setting is given.
func (t ClientTLS) Enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// ServerTLS configures a TLS listener; with ClientCAFile, clients must present
// a certificate signed by it (mutual TLS).
type ServerTLS struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
}

// Enabled reports whether the listener uses TLS.
func (t ServerTLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" || t.ClientCAFile != "" }

// Pool reads a PEM file of CA certificates (a bundle may hold several).
func Pool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificates found", file)
	}
	return p, nil
}

// Server builds a server configuration; with ClientCAFile set, clients must
// present a certificate that chains to it.
func Server(c ServerTLS) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.ClientCAFile != "" {
		p, err := Pool(c.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("client CA: %w", err)
		}
		cfg.ClientCAs = p
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Client builds a client configuration: CAFile replaces the system roots,
// CertFile/KeyFile are presented to servers that ask.
func Client(c ClientTLS) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		p, err := Pool(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA: %w", err)
		}
		cfg.RootCAs = p
	}
	if c.CertFile != "" || c.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
