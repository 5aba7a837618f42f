package certstore

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Options.
const (
	DefaultReloadInterval = 10 * time.Second
	DefaultTicketRotation = time.Hour
	DefaultTicketKeys     = 3
)

// Options configure a Store.
type Options struct {
	// Pairs are the certificates; the first is the default (package doc).
	Pairs []Pair
	// ReloadInterval is how often Run checks the files for changes;
	// 0: DefaultReloadInterval; negative: never (Reload only).
	ReloadInterval time.Duration
	// TicketRotation is how often Run draws a new session ticket key;
	// 0: DefaultTicketRotation.
	TicketRotation time.Duration
	// TicketKeys is how many ticket keys are kept, the newest included: a
	// ticket is honoured for TicketKeys-1 to TicketKeys rotations;
	// 0: DefaultTicketKeys.
	TicketKeys int
	// Logger; nil discards.
	Logger *slog.Logger
	// Registerer receives the store's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Store serves certificates by SNI and rotates session ticket keys. Its
// methods are safe for concurrent use.
type Store struct {
	pairs          []Pair
	reloadInterval time.Duration
	rotation       time.Duration
	keep           int
	log            *slog.Logger
	m              *metrics

	set  atomic.Pointer[certSet]
	conf atomic.Pointer[tls.Config] // what each handshake uses: current ticket keys

	mu   sync.Mutex // serialises reloads and rotations
	seen []stamp    // the files as last loaded or tried
	keys [][32]byte // newest first
}

// New loads every pair and draws the first ticket key. A pair that does
// not load is an error: the daemon has no previous set to fall back on.
func New(o Options) (*Store, error) {
	if len(o.Pairs) == 0 {
		return nil, errors.New("certstore: no certificates")
	}
	seen := map[string]bool{}
	for i, p := range o.Pairs {
		if p.CertFile == "" || p.KeyFile == "" {
			return nil, fmt.Errorf("certstore: certificate %d: cert_file and key_file are both required", i)
		}
		if seen[p.CertFile] {
			return nil, fmt.Errorf("certstore: %s is listed twice", p.CertFile)
		}
		seen[p.CertFile] = true
	}
	if o.TicketRotation < 0 || o.TicketKeys < 0 {
		return nil, errors.New("certstore: ticket rotation and ticket key count must not be negative")
	}
	s := &Store{
		pairs:          slices.Clone(o.Pairs),
		reloadInterval: cmp.Or(o.ReloadInterval, DefaultReloadInterval),
		rotation:       cmp.Or(o.TicketRotation, DefaultTicketRotation),
		keep:           cmp.Or(o.TicketKeys, DefaultTicketKeys),
		log:            o.Logger,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.m = newMetrics(s)
	s.mu.Lock()
	err := s.reloadLocked(stamps(s.pairs), "start")
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.rotateLocked()
	s.mu.Unlock()
	if o.Registerer != nil {
		s.m.register(o.Registerer)
	}
	return s, nil
}

// GetCertificate is tls.Config.GetCertificate: the certificate for the
// ClientHello's SNI name, else the default one. It never fails.
func (s *Store) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.set.Load().pick(hello), nil
}

// Reload reads every pair again and swaps the new set in; on any error
// the previous set stays in use, and the error is logged, counted and
// returned. The daemon calls it on SIGHUP.
func (s *Store) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadLocked(stamps(s.pairs), "SIGHUP")
}

// poll reloads when a file differs from the last load or attempt.
func (s *Store) poll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := stamps(s.pairs); !slices.Equal(st, s.seen) {
		_ = s.reloadLocked(st, "file change") // logged and counted
	}
}

// reloadLocked loads the files whose stamps (taken before reading, so
// that a change during the read is seen by the next poll) are st.
func (s *Store) reloadLocked(st []stamp, trigger string) error {
	s.seen = st
	now := time.Now()
	entries := make([]*entry, 0, len(s.pairs))
	var warns []string
	for _, p := range s.pairs {
		e, w, err := loadPair(p, now)
		if err != nil {
			s.m.reloadErr.Inc()
			s.m.failing.Store(true)
			if s.set.Load() != nil {
				s.log.Error("certificates not reloaded: the previous ones stay in use", "trigger", trigger, "err", err)
			}
			return fmt.Errorf("certstore: %w", err)
		}
		entries = append(entries, e)
		warns = append(warns, w...)
	}
	s.set.Store(newCertSet(entries))
	s.m.reloadOK.Inc()
	s.m.failing.Store(false)
	for _, w := range warns {
		s.log.Warn("certificate loaded with a problem", "problem", w)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.label()
	}
	s.log.Info("certificates loaded", "trigger", trigger, "certificates", names, "default", names[0])
	return nil
}

// Run polls the files every ReloadInterval and rotates the ticket keys
// every TicketRotation until ctx ends. Without Run the certificates change
// only through Reload and the ticket key never rotates.
func (s *Store) Run(ctx context.Context) error {
	var poll <-chan time.Time
	if s.reloadInterval > 0 {
		t := time.NewTicker(s.reloadInterval)
		defer t.Stop()
		poll = t.C
	}
	rot := time.NewTicker(s.rotation)
	defer rot.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-poll:
			s.poll()
		case <-rot.C:
			s.RotateTicketKeys()
		}
	}
}
