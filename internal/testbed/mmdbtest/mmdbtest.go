// Package mmdbtest writes small MaxMind DB files in the GeoLite2-City
// layout, so that GeoIP code is tested against the real format without a
// licensed database.
package mmdbtest

import (
	"bytes"
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// DefaultType is the database type written when Database.Type is empty.
const DefaultType = "GeoLite2-City"

// DefaultBuildEpoch is the build time (Unix seconds) written when
// Database.Built is zero: fixed, so the same entries give the same bytes.
const DefaultBuildEpoch = 1_767_225_600 // 2026-01-01T00:00:00Z

// Entry is one network of a database.
type Entry struct {
	Network netip.Prefix
	// Lat, Lon go to location.latitude and location.longitude.
	Lat, Lon float64
	// City goes to city.names.en and Country to country.iso_code when not
	// empty.
	City, Country string
	// NoLocation leaves the location map out, as real databases do for
	// networks known only to a country.
	NoLocation bool
}

// Database is a whole database: its metadata and its networks.
type Database struct {
	Type    string    // "" is DefaultType
	Built   time.Time // zero is DefaultBuildEpoch
	Entries []Entry
}

// Bytes encodes entries as a GeoLite2-City database.
func Bytes(entries []Entry) ([]byte, error) {
	return Database{Entries: entries}.Bytes()
}

// Write writes entries as a GeoLite2-City database to path (see
// Database.Write).
func Write(path string, entries []Entry) error {
	return Database{Entries: entries}.Write(path)
}

// Bytes encodes the database. IPv4 networks go to the IPv4 subtree of
// an IPv6 tree, which the writer aliases at ::ffff:0:0/96: plain and
// IPv4-mapped lookups both find them. Later entries replace earlier ones
// where they overlap.
func (d Database) Bytes() ([]byte, error) {
	epoch := int64(DefaultBuildEpoch)
	if !d.Built.IsZero() {
		epoch = d.Built.Unix()
	}
	tree, err := mmdbwriter.New(mmdbwriter.Options{
		DatabaseType:            cmp.Or(d.Type, DefaultType),
		Description:             map[string]string{"en": "anysched test database"},
		Languages:               []string{"en"},
		BuildEpoch:              epoch,
		IPVersion:               6,
		RecordSize:              28,
		IncludeReservedNetworks: true, // tests use documentation and private ranges
	})
	if err != nil {
		return nil, fmt.Errorf("mmdbtest: %w", err)
	}
	for i, e := range d.Entries {
		n, err := ipNet(e.Network)
		if err != nil {
			return nil, fmt.Errorf("mmdbtest: entry %d: %w", i, err)
		}
		if err := tree.Insert(n, record(e)); err != nil {
			return nil, fmt.Errorf("mmdbtest: entry %d (%s): %w", i, e.Network, err)
		}
	}
	var buf bytes.Buffer
	if _, err := tree.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("mmdbtest: %w", err)
	}
	return buf.Bytes(), nil
}

// Write writes the database to path through a temporary file and a
// rename, so that a process polling path never reads half a database.
func (d Database) Write(path string) error {
	b, err := d.Bytes()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".mmdbtest-*")
	if err != nil {
		return fmt.Errorf("mmdbtest: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("mmdbtest: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("mmdbtest: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("mmdbtest: %w", err)
	}
	return nil
}

func record(e Entry) mmdbtype.Map {
	m := mmdbtype.Map{}
	if !e.NoLocation {
		m["location"] = mmdbtype.Map{
			"latitude":        mmdbtype.Float64(e.Lat),
			"longitude":       mmdbtype.Float64(e.Lon),
			"accuracy_radius": mmdbtype.Uint16(50),
		}
	}
	if e.City != "" {
		m["city"] = mmdbtype.Map{"names": mmdbtype.Map{"en": mmdbtype.String(e.City)}}
	}
	if e.Country != "" {
		m["country"] = mmdbtype.Map{"iso_code": mmdbtype.String(e.Country)}
	}
	return m
}

// ipNet converts p for the writer; an IPv4-mapped prefix becomes the IPv4
// one, as the writer refuses inserts into its alias of the IPv4 subtree.
func ipNet(p netip.Prefix) (*net.IPNet, error) {
	if !p.IsValid() {
		return nil, fmt.Errorf("invalid network %s", p)
	}
	p = p.Masked()
	a, bits := p.Addr(), p.Bits()
	if a.Is4In6() { // masked, so bits >= 96
		a, bits = a.Unmap(), bits-96
	}
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, a.BitLen())}, nil
}
