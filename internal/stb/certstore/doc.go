// Package certstore holds the certificates and session ticket keys of the
// STB-facing HTTPS listener: one certificate per hostname, picked by SNI,
// reloaded from disk without a restart, with resumption across ticket key
// rotations.
//
// # Certificates
//
// The store is a list of (certificate file, key file) pairs, PEM encoded:
// the certificate file holds the leaf followed by its chain; the key (RSA,
// ECDSA or Ed25519; PKCS#1, SEC 1 or PKCS#8) must be the leaf's and its file
// must not be readable by group or others, since whoever reads it can
// impersonate the scheduler. Each leaf is indexed by its subject alternative
// DNS names; the common name is ignored, as browsers and curl ignore it. A
// name "*.iptv.example" matches exactly one label ("live.iptv.example", not
// "iptv.example" nor "a.b.iptv.example"); an exact name wins over a
// wildcard. The SNI name is compared case-insensitively, a trailing dot
// ignored.
//
// The first pair is the default certificate: it answers a ClientHello
// without SNI (an STB that dials the Anycast address as a literal IP) or
// with a name no certificate carries. A handshake therefore never fails for
// want of a certificate; a client that checks the name fails it instead,
// with a clear "certificate is valid for ..." error, and the operator
// chooses which certificate such clients see by listing it first.
//
// When several pairs carry one name (an ECDSA and an RSA certificate, so
// that old STBs without ECDSA still connect), the first the client supports
// is chosen, in configuration order.
//
// # Reloading
//
// The whole set is reloaded when any file changes (Run polls each file's
// modification time, size and inode: a rename over the file, an in-place
// write and a moved symlink are all seen) and on demand (Reload, which the
// daemon calls on SIGHUP). A reload reads and checks every pair before the
// new set replaces the old through an atomic pointer: a handshake under way
// keeps the certificate it picked, the next one sees the new set, and none
// sees half of each. If any pair is bad (unreadable, not PEM, the key not
// the certificate's, the key file open to group or others) the previous set
// stays in use, and the error is logged and counted
// (anysched_certstore_reloads_total{result="error"}). The poll does not
// retry files it has already failed on until one of them changes again, so
// that a certificate renamed into place before its key costs one error,
// not one every interval. An expired or not yet valid certificate is
// loaded all the same, with a warning: serving it makes the failure visible
// to the clients that check dates, where refusing to load it would leave the
// previous, equally stale certificate in place; its expiry is exported
// (anysched_certstore_certificate_expiry_timestamp_seconds) to alert on.
//
// # Session tickets
//
// Resumption saves an STB a full handshake (the server's signature and key
// exchange) on every reconnect. Tickets are encrypted with keys drawn from
// crypto/rand and held in memory only: the newest key encrypts, it and the
// previous ones decrypt. Keys rotate every TicketRotation (1 h by default)
// and TicketKeys of them (3) are kept, so a ticket is honoured for at least
// two and at most three rotation intervals: long enough for an STB that
// reconnects between programmes, short enough that a key read from the
// process's memory opens only TLS 1.2 sessions of the last few hours (a
// TLS 1.2 ticket carries the session's master secret; TLS 1.3 resumption
// in crypto/tls always adds an ECDHE exchange). The keys are
// not shared: schedulers behind one Anycast address each have their own, so
// an STB whose route moves to another scheduler does one full handshake
// there, which is the price of never writing a key to disk or the network.
//
// The keys reach crypto/tls through GetConfigForClient, which hands each
// handshake the current configuration: a copy of the configuration
// returned by TLSConfig (net/http's ServeTLS clones it) still sees rotated
// keys and reloaded certificates.
package certstore
