package main

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/anysched/anysched/internal/testbed/mmdbtest"
)

// networkFlags is the repeatable --network CIDR=LAT,LON[,CITY] of
// geoip-db.
type networkFlags []mmdbtest.Entry

func (n *networkFlags) String() string { return fmt.Sprint(len(*n), " networks") }

func (n *networkFlags) Set(v string) error {
	e, err := parseNetwork(v)
	if err != nil {
		return err
	}
	*n = append(*n, e)
	return nil
}

// parseNetwork reads CIDR=LAT,LON[,CITY].
func parseNetwork(v string) (mmdbtest.Entry, error) {
	cidr, rest, ok := strings.Cut(v, "=")
	if !ok {
		return mmdbtest.Entry{}, fmt.Errorf("%q: want CIDR=LAT,LON[,CITY]", v)
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return mmdbtest.Entry{}, fmt.Errorf("%q: %w", v, err)
	}
	f := strings.SplitN(rest, ",", 3)
	if len(f) < 2 {
		return mmdbtest.Entry{}, fmt.Errorf("%q: want CIDR=LAT,LON[,CITY]", v)
	}
	lat, err1 := strconv.ParseFloat(f[0], 64)
	lon, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil || lat < -90 || lat > 90 || lon < -180 || lon > 180 {
		return mmdbtest.Entry{}, fmt.Errorf("%q: latitude and longitude must be numbers within [-90, 90] and [-180, 180]", v)
	}
	e := mmdbtest.Entry{Network: p.Masked(), Lat: lat, Lon: lon}
	if len(f) == 3 {
		e.City = f[2]
	}
	return e, nil
}

// labNetworks are geoip-db's networks when none are given: documentation
// addresses (RFC 5737) placed in three of the sample province's cities, so
// that an STB outside every coverage zone can be seen placed (result GEO).
var labNetworks = []string{
	"203.0.113.0/24=31.35,118.43,Wuhu",
	"198.51.100.0/24=32.89,115.81,Fuyang",
	"192.0.2.0/24=30.51,117.05,Anqing",
}

// geoipDB writes a small database in the GeoLite2-City layout to out.
func geoipDB(out string, nets networkFlags, stdout io.Writer) error {
	if out == "" {
		return fmt.Errorf("%w: geoip-db needs --out FILE", errUsage)
	}
	if len(nets) == 0 {
		for _, v := range labNetworks {
			e, err := parseNetwork(v)
			if err != nil {
				return err
			}
			nets = append(nets, e)
		}
	}
	if err := mmdbtest.Write(out, nets); err != nil {
		return fmt.Errorf("geoip-db: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s: %d networks, GeoLite2-City layout (geoip.database: %s)\n", out, len(nets), out)
	for _, e := range nets {
		fmt.Fprintf(stdout, "  %-18s %.2f, %.2f %s\n", e.Network, e.Lat, e.Lon, e.City)
	}
	return nil
}
