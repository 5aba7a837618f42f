package geo

import (
	"math"
	"testing"
)

func TestDistanceM(t *testing.T) {
	tests := []struct {
		name                   string
		lat1, lon1, lat2, lon2 float64
		wantKm, tolKm          float64
	}{
		{"same point", 31.82, 117.23, 31.82, 117.23, 0, 0.001},
		{"hefei-wuhu", 31.82, 117.23, 31.35, 118.43, 124.6, 1.5},
		{"one degree of latitude", 0, 0, 1, 0, 111.2, 0.1},
		{"antipodes", 0, 0, 0, 180, math.Pi * 6371.0, 0.01},
		{"across the antimeridian", 0, 179.5, 0, -179.5, 111.2, 0.1},
	}
	for _, tt := range tests {
		got := DistanceM(tt.lat1, tt.lon1, tt.lat2, tt.lon2) / 1000
		if math.Abs(got-tt.wantKm) > tt.tolKm {
			t.Errorf("%s: got %.3f km, want %.3f ± %.3f", tt.name, got, tt.wantKm, tt.tolKm)
		}
	}
}

// TestDistanceCosMIsDistanceM: with the cosines from CosLat the two give the
// same bits, which the QoE model's coverage test (a radius compared exactly)
// relies on.
func TestDistanceCosMIsDistanceM(t *testing.T) {
	for _, p := range [][4]float64{{31.82, 117.23, 31.35, 118.43}, {-37.8136, 144.9631, -37.8102, 144.9628}, {89.9, 0, -89.9, 180}, {0, 179.5, 0, -179.5}} {
		d := DistanceM(p[0], p[1], p[2], p[3])
		if c := DistanceCosM(p[0], p[1], CosLat(p[0]), p[2], p[3], CosLat(p[2])); c != d {
			t.Errorf("%v: DistanceCosM %v, DistanceM %v", p, c, d)
		}
	}
}
