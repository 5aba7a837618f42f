package topogen

import (
	"fmt"
	"strings"
	"testing"
)

// anhuiResidents2020 is the province's resident population in the census
// bulletin: the cities' figures must add up to it.
const anhuiResidents2020 = 61_027_171

// TestAnhuiPopulation: the census table names the cities of
// data/anhui-cities.csv in the same order, and its figures add up to the
// province's total, so that a mistyped figure cannot pass unseen.
func TestAnhuiPopulation(t *testing.T) {
	cities, err := LoadCities(citiesPath)
	if err != nil {
		t.Fatal(err)
	}
	pop := AnhuiPopulation()
	if len(pop) != len(cities) {
		t.Fatalf("%d cities in the census table, %d in %s", len(pop), len(cities), citiesPath)
	}
	sum := 0
	for i, p := range pop {
		if p.City != cities[i].Name {
			t.Errorf("census row %d is %q, %s has %q there", i+1, p.City, citiesPath, cities[i].Name)
		}
		sum += p.Residents
	}
	if sum != anhuiResidents2020 {
		t.Errorf("the cities' residents add up to %d, the census bulletin's province to %d", sum, anhuiResidents2020)
	}
}

// TestAnhuiSplit: the design's prime-time viewers and set-top boxes, city
// by city, add up, keep the largest city within what the design sizes a
// city for, and give the capital the most and Tongling the fewest.
func TestAnhuiSplit(t *testing.T) {
	for _, total := range []int{PrimeTimeViewers, ProvinceSTBs} {
		split := AnhuiSplit(total)
		sum, most, fewest := 0, split[0], split[0]
		for _, c := range split {
			sum += c.N
			if c.N > most.N {
				most = c
			}
			if c.N < fewest.N {
				fewest = c
			}
		}
		if sum != total {
			t.Errorf("AnhuiSplit(%d) adds up to %d", total, sum)
		}
		if most.City != "hefei" || fewest.City != "tongling" {
			t.Errorf("AnhuiSplit(%d): most %v, fewest %v; want hefei and tongling", total, most, fewest)
		}
	}
	viewers := AnhuiSplit(PrimeTimeViewers)
	if viewers[0] != (CityCount{"hefei", 460_609}) {
		t.Errorf("hefei's prime-time viewers = %v, want 460,609 (docs/capacity.md)", viewers[0])
	}
	if viewers[0].N > MaxCityViewers {
		t.Errorf("hefei's %d prime-time viewers exceed MaxCityViewers %d", viewers[0].N, MaxCityViewers)
	}
}

func TestSplit(t *testing.T) {
	pop := func(n ...int) []Population {
		var out []Population
		for i, r := range n {
			out = append(out, Population{City: fmt.Sprintf("c%d", i), Residents: r})
		}
		return out
	}
	counts := func(cs []CityCount) []int {
		var out []int
		for _, c := range cs {
			out = append(out, c.N)
		}
		return out
	}
	for _, tc := range []struct {
		pop   []int
		total int
		want  string
	}{
		{[]int{1, 1, 1}, 5, "[2 2 1]"},                    // ties: the earlier city first
		{[]int{1, 1, 1}, 0, "[0 0 0]"},                    // nothing to share
		{[]int{3, 1}, 10, "[8 2]"},                        // 7.5 and 2.5: the tie goes to the first
		{[]int{1, 2, 7}, 10, "[1 2 7]"},                   // exact shares
		{[]int{10, 10, 1}, 3, "[2 1 0]"},                  // 1.43, 1.43, 0.14: the unit left over to the first
		{[]int{1 << 40, 1}, 1 << 40, "[1099511627775 1]"}, // no overflow in total x residents
		{[]int{5}, 7, "[7]"},
	} {
		got := fmt.Sprint(counts(Split(pop(tc.pop...), tc.total)))
		if got != tc.want {
			t.Errorf("Split(%v, %d) = %s, want %s", tc.pop, tc.total, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name  string
		pop   []Population
		total int
	}{
		{"negative total", pop(1), -1},
		{"no cities", nil, 1},
		{"no residents", pop(1, 0), 1},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Split with %s did not panic", tc.name)
				}
			}()
			Split(tc.pop, tc.total)
		}()
	}
}

func TestReadPopulation(t *testing.T) {
	pop, err := ReadPopulation(strings.NewReader("city,population\nhefei, 9369881\n# comment\nwuhu,3644420\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pop) != "[{hefei 9369881} {wuhu 3644420}]" {
		t.Errorf("population = %v", pop)
	}
	for _, tc := range []struct{ in, want string }{
		{"", "empty file; expected the header city,population"},
		{"city,lat,lon\n", `line 1: header is "city,lat,lon", want "city,population"`},
		{"city,population\n", "no cities"},
		{"city,population\nhefei\n", "line 2: 1 fields, want 2 (city,population)"},
		{"city,population\nhefei,9.3e6\n", `line 2: population "9.3e6" is not a positive whole number`},
		{"city,population\nhefei,9369881\nwuhu,0\n", `line 3: population "0"`},
		{"city,population\nHefei,1\n", `line 2: city "Hefei" is not a valid region name`},
		{"city,population\nhefei,1\nhefei,2\n", `line 3: city "hefei" already on line 2`},
	} {
		_, err := ReadPopulation(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadPopulation(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}
