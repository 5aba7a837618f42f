package mmdbtest

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

func TestBytes(t *testing.T) {
	tests := []struct {
		name    string
		entries []Entry
		wantErr string
	}{
		{"IPv4 and IPv6", []Entry{
			{Network: netip.MustParsePrefix("192.0.2.0/24"), Lat: 1, Lon: 2, City: "A", Country: "FR"},
			{Network: netip.MustParsePrefix("2001:db8::/32"), Lat: 3, Lon: 4},
		}, ""},
		{"IPv4-mapped", []Entry{{Network: netip.MustParsePrefix("::ffff:192.0.2.0/120")}}, ""},
		{"no entries", nil, ""},
		{"invalid network", []Entry{{}}, "entry 0: invalid network"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Bytes(tt.entries)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Bytes = %v; want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			again, err := Bytes(tt.entries)
			if err != nil || !bytes.Equal(b, again) {
				t.Errorf("the same entries gave different bytes (%v)", err)
			}
			if !bytes.Contains(b, []byte("\xab\xcd\xefMaxMind.com")) || !bytes.Contains(b, []byte(DefaultType)) {
				t.Error("no MaxMind DB metadata")
			}
		})
	}
}
