// Package geo has the great-circle distance used to rank servers and regions.
package geo

import "math"

const earthRadiusM = 6_371_008.8 // mean Earth radius (IUGG)

// DistanceM is the haversine distance in metres between two WGS84 points in degrees.
func DistanceM(lat1, lon1, lat2, lon2 float64) float64 {
	const rad = math.Pi / 180
	dLat := (lat2 - lat1) * rad
	dLon := (lon2 - lon1) * rad
	s1, s2 := math.Sin(dLat/2), math.Sin(dLon/2)
	a := s1*s1 + math.Cos(lat1*rad)*math.Cos(lat2*rad)*s2*s2
	return 2 * earthRadiusM * math.Asin(math.Sqrt(min(1, a)))
}
