package lab

import (
	"bytes"
	"fmt"
	"os/exec"
	"time"

	"github.com/anysched/anysched/data"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/stb/geo"
)

// Link delays from the cities' distances. A city's link to the core stands
// for the fibre from the city to the provincial capital, where the core is:
//
//	one-way delay = LinkFixedDelay + distance × RouteFactor / FibreKmPerMs
//
// with the great-circle distance between the city and the capital
// (anhui-cities.csv), light in fibre at about 200 km/ms (two thirds of c),
// a route factor of 1.5 (fibre follows roads and rings, not the great
// circle) and a fixed 0.2 ms for the equipment of the two ends (switching,
// serialisation). Rounded to 10 µs. The capital's own router gets the fixed
// part only. netem applies the one-way delay on the egress of both ends of
// the link, so a round trip over it takes twice that.
const (
	Capital        = "hefei"
	FibreKmPerMs   = 200.0
	RouteFactor    = 1.5
	LinkFixedDelay = 200 * time.Microsecond
)

// capitalFallback is Hefei's position when the city file cannot be read.
var capitalFallback = topogen.City{Name: Capital, Lat: 31.82, Lon: 117.23}

// LinkDelay is the one-way delay of a city-core link for a great-circle
// distance in km.
func LinkDelay(km float64) time.Duration {
	d := LinkFixedDelay + time.Duration(km*RouteFactor/FibreKmPerMs*float64(time.Millisecond))
	return d.Round(10 * time.Microsecond)
}

// CityDelay is one city's link: its distance to the capital and the one-way
// delay its link to the core gets.
type CityDelay struct {
	City       string
	DistanceKm float64
	Delay      time.Duration
}

// LinkDelays plans the city-core link delays of a lab: from the distances
// with DistanceDelays, else half of the fixed round-trip Delay on each
// link (0: none).
func LinkDelays(o Options) []CityDelay {
	cities := cityCoords(o.Cities)
	capital := capitalFallback
	for _, c := range loadCities() {
		if c.Name == Capital {
			capital = c
		}
	}
	out := make([]CityDelay, len(cities))
	for i, c := range cities {
		km := geo.DistanceM(capital.Lat, capital.Lon, c.Lat, c.Lon) / 1000
		d := o.Delay / 2
		if o.DistanceDelays {
			d = LinkDelay(km)
		}
		out[i] = CityDelay{City: c.Name, DistanceKm: km, Delay: d}
	}
	return out
}

// loadCities reads the sample province's cities (data/anhui-cities.csv,
// embedded).
func loadCities() []topogen.City {
	cs, err := topogen.ReadCities(bytes.NewReader(data.AnhuiCities))
	if err != nil {
		panic("data/anhui-cities.csv: " + err.Error()) // embedded and tested: a build defect
	}
	return cs
}

// cityCoords gives the lab's cities their positions from the city file, or
// made-up ones for a city it does not have.
func cityCoords(names []string) []topogen.City {
	known := map[string]topogen.City{}
	for _, c := range loadCities() {
		known[c.Name] = c
	}
	cities := make([]topogen.City, len(names))
	for i, n := range names {
		c, ok := known[n]
		if !ok {
			c = topogen.City{Name: n, Lat: 31 + float64(i)*0.3, Lon: 117 + float64(i)*0.3}
		}
		cities[i] = c
	}
	return cities
}

// netemCommand is the command that delays everything leaving dev in the
// namespace ns by d.
func netemCommand(ns, dev string, d time.Duration) []string {
	return []string{"ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", fmt.Sprintf("%dus", d.Microseconds())}
}

// FormatDelays is a one-line summary: "hefei 0.20ms (0 km), wuhu 1.13ms (125 km)".
func FormatDelays(ds []CityDelay) string {
	s := ""
	for i, d := range ds {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %.2fms (%.0f km)", d.City, float64(d.Delay.Microseconds())/1000, d.DistanceKm)
	}
	return s
}

// netemAvailable reports whether the kernel has the netem qdisc, by adding
// one in a scratch namespace.
func netemAvailable(prefix string) bool {
	ns := prefix + "-netemprobe"
	_ = exec.Command("ip", "netns", "del", ns).Run()
	if exec.Command("ip", "netns", "add", ns).Run() != nil {
		return false
	}
	defer func() { _ = exec.Command("ip", "netns", "del", ns).Run() }()
	return exec.Command("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms").Run() == nil
}

// AllCities names the sample province's cities (data/anhui-cities.csv), the
// capital first: the whole province, as the demo and the rollout bench run it.
func AllCities() []string {
	var out []string
	for _, c := range loadCities() {
		out = append(out, c.Name)
	}
	return out
}
