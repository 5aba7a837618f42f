// Package data carries the data files the code reads, embedded so that a
// binary or a test finds them wherever the repository or the binary is:
// the sample province's cities and their census populations, and the EUA
// sites and users of the QoE experiment. README.md says where each comes
// from and under which licence.
package data

import _ "embed"

// AnhuiCities is anhui-cities.csv: city,lat,lon, the capital first.
//
//go:embed anhui-cities.csv
var AnhuiCities []byte

// AnhuiCensus2020 is anhui-census-2020.csv: city,population, each city's
// resident population at the 2020 census, in the order of AnhuiCities.
//
//go:embed anhui-census-2020.csv
var AnhuiCensus2020 []byte

// EUASites is eua/site-optus-melbCBD.csv: the edge server sites.
//
//go:embed eua/site-optus-melbCBD.csv
var EUASites []byte

// EUAUsers is eua/users-melbcbd-generated.csv: the users.
//
//go:embed eua/users-melbcbd-generated.csv
var EUAUsers []byte
