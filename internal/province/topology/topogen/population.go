package topogen

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strconv"

	"github.com/anysched/anysched/data"
)

// The design's province (docs/capacity.md): the set-top boxes it serves and
// how many of them play at once at prime time. AnhuiSplit spreads either
// over the sample province's cities.
const (
	ProvinceSTBs     = 8_000_000
	PrimeTimeViewers = 3_000_000
	// MaxCityViewers is the most prime-time viewers the design sizes one
	// city for; the sample's largest city gets fewer (TestAnhuiSplit).
	MaxCityViewers = 600_000
)

// Population is a city's resident population.
type Population struct {
	City      string
	Residents int
}

// CityCount is a count of one city's (set-top boxes, viewers, sessions).
type CityCount struct {
	City string
	N    int
}

// ReadPopulation reads a CSV table with the header "city,population" and a
// city a line (the format of data/anhui-census-2020.csv); a population is
// a positive whole number. Errors name the line.
func ReadPopulation(r io.Reader) ([]Population, error) {
	var out []Population
	err := readTable(r, []string{"city", "population"}, "cities", func(line int, rec []string) error {
		n, err := strconv.Atoi(rec[1])
		if err != nil || n <= 0 {
			return fmt.Errorf("line %d: population %q is not a positive whole number", line, rec[1])
		}
		out = append(out, Population{City: rec[0], Residents: n})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AnhuiPopulation is the sample province's cities with their resident
// population at the Seventh National Population Census (2020), in the
// order of data/anhui-cities.csv (data/anhui-census-2020.csv; data/README.md
// cites the census bulletin).
func AnhuiPopulation() []Population {
	pop, err := ReadPopulation(bytes.NewReader(data.AnhuiCensus2020))
	if err != nil {
		panic("data/anhui-census-2020.csv: " + err.Error()) // embedded and tested: a build defect
	}
	return pop
}

// Split shares total out over the cities in proportion to their residents:
// each city gets the whole part of its share, and the units left over go
// to the cities with the largest fractions, the earlier city first on a
// tie (the largest remainder method). So the counts add up to total
// exactly, each is within one of its exact share, and the same input
// always gives the same split. It panics when total is negative, pop is
// empty or a city has no residents.
func Split(pop []Population, total int) []CityCount {
	if total < 0 || len(pop) == 0 {
		panic(fmt.Sprintf("topogen: Split of %d over %d cities: need a total >= 0 and at least one city", total, len(pop)))
	}
	var sum uint64
	for _, p := range pop {
		if p.Residents <= 0 {
			panic(fmt.Sprintf("topogen: Split: city %q has %d residents, want > 0", p.City, p.Residents))
		}
		var carry uint64
		if sum, carry = bits.Add64(sum, uint64(p.Residents), 0); carry != 0 {
			panic("topogen: Split: residents overflow")
		}
	}
	out := make([]CityCount, len(pop))
	rem := make([]uint64, len(pop))
	left := total
	for i, p := range pop {
		// total*residents/sum, exactly: the quotient is at most total.
		hi, lo := bits.Mul64(uint64(total), uint64(p.Residents))
		q, r := bits.Div64(hi, lo, sum)
		out[i] = CityCount{City: p.City, N: int(q)}
		rem[i] = r
		left -= int(q)
	}
	order := make([]int, len(pop))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rem[b], rem[a]) })
	for _, i := range order[:left] {
		out[i].N++
	}
	return out
}

// AnhuiSplit is Split over AnhuiPopulation: the sample province's total
// (ProvinceSTBs, PrimeTimeViewers, a benchmark's sessions) city by city.
func AnhuiSplit(total int) []CityCount {
	return Split(AnhuiPopulation(), total)
}
