package certstore

import (
	"crypto/rand"
	"crypto/tls"
)

// TLSConfig returns the configuration of an STB-facing HTTPS listener:
// TLS 1.2 and 1.3; for 1.2 only ECDHE key exchange with AEAD ciphers (1.3
// has nothing else); X25519 and P-256; ALPN http/1.1 only, since STBs speak
// HTTP/1.1 and a single protocol keeps net/http from offering h2. Each call
// returns a new Config; all of them follow the store's certificates and
// ticket keys.
func (s *Store) TLSConfig() *tls.Config {
	c := s.baseConfig()
	// The per-handshake configuration carries the ticket keys: a clone of
	// c (net/http's ServeTLS makes one) still sees every rotation.
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return s.conf.Load(), nil }
	return c
}

func (s *Store) baseConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		CipherSuites: []uint16{ // TLS 1.2 only; ECDSA first, the faster signature
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256},
		NextProtos:       []string{"http/1.1"},
		GetCertificate:   s.GetCertificate,
	}
}

// RotateTicketKeys draws a new session ticket key, which encrypts new
// tickets from now on, and drops the oldest beyond TicketKeys. Run calls
// it every TicketRotation.
func (s *Store) RotateTicketKeys() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rotateLocked()
	s.m.rotations.Inc()
}

func (s *Store) rotateLocked() {
	var k [32]byte
	rand.Read(k[:]) // never fails: crypto/rand aborts the process instead
	keys := make([][32]byte, 0, s.keep)
	keys = append(keys, k)
	keys = append(keys, s.keys[:min(len(s.keys), s.keep-1)]...)
	s.keys = keys
	// A new Config per rotation, swapped in with one atomic store: a
	// Config that handshakes are using is never modified.
	c := s.baseConfig()
	c.SetSessionTicketKeys(keys)
	s.conf.Store(c)
}
