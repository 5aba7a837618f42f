// Package geo has the one great-circle distance of the system: what the
// routing engine ranks servers and regions by, what the topology's coverage
// warnings and the QoE model's coverage and latencies measure, so that a
// server's coverage_radius_m means the same everywhere.
package geo

import "math"

// EarthRadiusM is the radius of the sphere the distance is measured on: 6,371
// km, the mean Earth radius as the QoE model's per-km latencies and its
// published figures (docs/benchmarks.md) were computed with.
const EarthRadiusM = 6_371_000.0

// DistanceM is the haversine distance in metres between two WGS84 points in
// degrees.
func DistanceM(lat1, lon1, lat2, lon2 float64) float64 {
	return DistanceCosM(lat1, lon1, CosLat(lat1), lat2, lon2, CosLat(lat2))
}

// CosLat is the cosine of a latitude in degrees exactly as DistanceM
// computes it, for callers that measure many distances from one point.
func CosLat(lat float64) float64 { return math.Cos(lat * math.Pi / 180) }

// DistanceCosM is DistanceM with the cosines of both latitudes (CosLat)
// given; it computes the same expression, so the result is identical to the
// bit (the QoE model's exact coverage test relies on it).
func DistanceCosM(lat1, lon1, cos1, lat2, lon2, cos2 float64) float64 {
	p1, p2 := lat1*math.Pi/180, lat2*math.Pi/180
	dp, dl := p2-p1, (lon2-lon1)*math.Pi/180
	sp, sl := math.Sin(dp/2), math.Sin(dl/2)
	h := sp*sp + cos1*cos2*sl*sl
	return 2 * EarthRadiusM * math.Asin(math.Min(1, math.Sqrt(h)))
}
