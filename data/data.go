// Package data carries the data files the code reads, embedded so that a
// binary or a test finds them wherever the repository or the binary is:
// the sample province's cities and the EUA sites and users of the QoE
// experiment. README.md says where each comes from and under which licence.
package data

import _ "embed"

// AnhuiCities is anhui-cities.csv: city,lat,lon, the capital first.
//
//go:embed anhui-cities.csv
var AnhuiCities []byte

// EUASites is eua/site-optus-melbCBD.csv: the edge server sites.
//
//go:embed eua/site-optus-melbCBD.csv
var EUASites []byte

// EUAUsers is eua/users-melbcbd-generated.csv: the users.
//
//go:embed eua/users-melbcbd-generated.csv
var EUAUsers []byte
