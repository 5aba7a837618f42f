// Package geoip locates addresses with a MaxMind DB in the GeoLite2-City
// layout: the scheduler's answer for set-top boxes in no coverage zone.
//
// The database is read into memory, never mapped: a reload swaps in a new
// reader while lookups on the old one finish, and the garbage collector
// frees the old one once no lookup holds it. A mapped file would have to be
// unmapped, which faults a lookup still reading it.
package geoip

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oschwald/maxminddb-golang/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultInterval is how often Run checks the file for a change.
const DefaultInterval = 30 * time.Second

// Option configures Open.
type Option func(*DB)

// WithInterval sets how often Run checks the file for a change; 0 is
// DefaultInterval, negative never (Reload only).
func WithInterval(d time.Duration) Option {
	return func(db *DB) { db.interval = cmp.Or(d, DefaultInterval) }
}

// Info describes the database in use.
type Info struct {
	Path      string
	Type      string    // the metadata's database_type, e.g. GeoLite2-City
	Built     time.Time // the metadata's build epoch
	Nodes     uint      // search tree nodes
	IPVersion uint      // 4: IPv4 only; 6: both
	Loaded    time.Time // when this database was read
	// ReloadError is why the file as it is now was not loaded, "" when
	// the database in use is the file's current content.
	ReloadError string
}

// DB answers Locate from the database at a path, reloading it on Reload or
// when Run sees the file change. Its methods are safe for concurrent use.
type DB struct {
	path     string
	interval time.Duration
	log      *slog.Logger
	m        *metrics

	cur atomic.Pointer[loaded]

	mu      sync.Mutex // serialises reloads
	seen    stamp      // the file as last loaded or tried
	lastErr error      // of the last load, nil if it succeeded
}

// loaded is one database version.
type loaded struct {
	r    *maxminddb.Reader
	info Info
	// warned is set after the first lookup error on this version is
	// logged: a bad record is hit on every lookup into its network.
	warned atomic.Bool
}

// Open reads the database at path and registers its metrics on reg (nil
// registers none). log nil discards.
func Open(path string, reg prometheus.Registerer, log *slog.Logger, opts ...Option) (*DB, error) {
	db := &DB{path: path, interval: DefaultInterval, log: log, m: newMetrics()}
	for _, o := range opts {
		o(db)
	}
	if db.log == nil {
		db.log = slog.New(slog.DiscardHandler)
	}
	db.mu.Lock()
	err := db.reloadLocked(statFile(path), "open")
	db.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if reg != nil {
		if err := db.m.register(reg); err != nil {
			return nil, fmt.Errorf("geoip: metrics: %w", err)
		}
	}
	return db, nil
}

// Locate returns the location of the network addr is in. ok is false when
// addr is invalid or in no network, when the network's record has no
// location (or 0,0: the value MaxMind leaves for an unknown one) and when
// the record cannot be read. An IPv4-mapped IPv6 address is looked up as
// IPv4.
func (db *DB) Locate(addr netip.Addr) (lat, lon float64, ok bool) {
	if !addr.IsValid() {
		db.m.notFound.Inc()
		return 0, 0, false
	}
	addr = addr.Unmap().WithZone("")
	l := db.cur.Load()
	if addr.Is6() && l.info.IPVersion == 4 {
		db.m.notFound.Inc() // the reader would call this an error
		return 0, 0, false
	}
	res := l.r.Lookup(addr)
	if err := res.Err(); err != nil {
		db.lookupError(l, addr, err)
		return 0, 0, false
	}
	if !res.Found() {
		db.m.notFound.Inc()
		return 0, 0, false
	}
	var loc location
	if err := res.DecodePath(&loc, "location"); err != nil {
		db.lookupError(l, addr, err)
		return 0, 0, false
	}
	if loc.Lat == 0 && loc.Lon == 0 {
		db.m.notFound.Inc()
		return 0, 0, false
	}
	if !(math.Abs(loc.Lat) <= 90 && math.Abs(loc.Lon) <= 180) { // NaN too
		db.lookupError(l, addr, fmt.Errorf("location %v,%v out of range", loc.Lat, loc.Lon))
		return 0, 0, false
	}
	db.m.found.Inc()
	return loc.Lat, loc.Lon, true
}

// location is the part of a GeoLite2-City record Locate reads; a missing
// field decodes as 0.
type location struct {
	Lat float64 `maxminddb:"latitude"`
	Lon float64 `maxminddb:"longitude"`
}

func (db *DB) lookupError(l *loaded, addr netip.Addr, err error) {
	db.m.errors.Inc()
	if l.warned.CompareAndSwap(false, true) {
		db.log.Warn("GeoIP record unreadable; further errors from this database are only counted",
			"file", db.path, "addr", addr, "err", err)
	}
}

// Info describes the database in use.
func (db *DB) Info() Info {
	i := db.cur.Load().info
	db.mu.Lock()
	if db.lastErr != nil {
		i.ReloadError = db.lastErr.Error()
	}
	db.mu.Unlock()
	return i
}

// Reload reads the file again and swaps it in. On error the database in
// use stays, and the error is logged, counted and returned.
func (db *DB) Reload() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.reloadLocked(statFile(db.path), "reload")
}

// Run checks the file every interval and reloads it when its size,
// modification time or identity (a rename over it) changed, until ctx
// ends. A file that fails to load is logged once and retried only when it
// changes again.
func (db *DB) Run(ctx context.Context) error {
	if db.interval < 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(db.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			db.poll()
		}
	}
}

// poll reloads when the file differs from the last load or attempt.
func (db *DB) poll() {
	db.mu.Lock()
	defer db.mu.Unlock()
	if st := statFile(db.path); !st.same(db.seen) {
		_ = db.reloadLocked(st, "file change") // logged and counted
	}
}

// reloadLocked loads the file whose stamp (taken before reading, so that a
// change during the read is seen by the next poll) is st.
func (db *DB) reloadLocked(st stamp, trigger string) error {
	db.seen = st
	l, err := load(db.path)
	db.lastErr = err
	if err != nil {
		if db.cur.Load() != nil { // Open's failure is the caller's to report
			db.m.reloadErr.Inc()
			db.log.Warn("GeoIP database not reloaded: the previous one stays in use",
				"trigger", trigger, "err", err)
		}
		return err
	}
	// The old reader is not closed: lookups may still hold it, and Close
	// is not safe against them. Unreferenced, the collector frees it.
	old := db.cur.Swap(l)
	db.m.buildTime.Set(float64(l.info.Built.Unix()))
	if old != nil {
		db.m.reloadOK.Inc()
	}
	db.log.Info("GeoIP database loaded", "trigger", trigger, "file", db.path,
		"type", l.info.Type, "built", l.info.Built, "nodes", l.info.Nodes)
	return nil
}

// Check opens the database at path as Open would and says what it is,
// without keeping it: for --check-config.
func Check(path string) (Info, error) {
	l, err := load(path)
	if err != nil {
		return Info{}, err
	}
	return l.info, nil
}

func load(path string) (*loaded, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("geoip: %w", err)
	}
	r, err := maxminddb.OpenBytes(b, maxminddb.DisableStringCache())
	if err != nil {
		return nil, fmt.Errorf("geoip: %s is not a MaxMind DB: %w", path, err)
	}
	md := r.Metadata
	if md.IPVersion != 4 && md.IPVersion != 6 {
		return nil, fmt.Errorf("geoip: %s: unknown IP version %d in its metadata", path, md.IPVersion)
	}
	return &loaded{r: r, info: Info{
		Path:      path,
		Type:      md.DatabaseType,
		Built:     md.BuildTime().UTC(),
		Nodes:     md.NodeCount,
		IPVersion: md.IPVersion,
		Loaded:    time.Now(),
	}}, nil
}

// stamp identifies a version of the file without reading it.
type stamp struct {
	fi  os.FileInfo // nil: the file could not be stat'ed
	err string
}

func statFile(path string) stamp {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{err: err.Error()}
	}
	return stamp{fi: fi}
}

func (s stamp) same(o stamp) bool {
	if s.fi == nil || o.fi == nil {
		return s.fi == nil && o.fi == nil && s.err == o.err
	}
	return os.SameFile(s.fi, o.fi) && s.fi.Size() == o.fi.Size() && s.fi.ModTime().Equal(o.fi.ModTime())
}
