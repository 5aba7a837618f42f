package balance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// servers makes named servers s0, s1, ... with the given weights.
func servers(weights ...float64) []Server {
	out := make([]Server, len(weights))
	for i, w := range weights {
		out[i] = Server{Index: int32(i), Name: fmt.Sprintf("s%d", i), Weight: w}
	}
	return out
}

// equalServers makes n servers of weight 100.
func equalServers(n int) []Server {
	w := make([]float64, n)
	for i := range w {
		w[i] = 100
	}
	return servers(w...)
}

func healthy(n int) []Load {
	l := make([]Load, n)
	for i := range l {
		l[i].Healthy = true
	}
	return l
}

// zipfKeys returns a deterministic Zipf(s) stream of n key hashes over
// channels channels ("ch0" is the most popular).
func zipfKeys(n, channels int, s float64, seed uint64) []uint64 {
	hashes := make([]uint64, channels)
	for i := range hashes {
		hashes[i] = HashKey(fmt.Sprintf("ch%d", i))
	}
	z := rand.NewZipf(rand.New(rand.NewPCG(seed, seed^0x5eed)), s, 1, uint64(channels-1))
	out := make([]uint64, n)
	for i := range out {
		out[i] = hashes[z.Uint64()]
	}
	return out
}

// checkShares fails unless each server's share of counts is within rel
// (relative) of its weight share.
func checkShares(t *testing.T, counts map[int32]int, ss []Server, rel float64) {
	t.Helper()
	total, sumW := 0, 0.0
	for _, c := range counts {
		total += c
	}
	for _, s := range ss {
		sumW += s.Weight
	}
	for _, s := range ss {
		want := s.Weight / sumW
		got := float64(counts[s.Index]) / float64(total)
		if math.Abs(got-want) > rel*want {
			t.Errorf("server %s (weight %v): share %.5f, want %.5f +- %.1f%%", s.Name, s.Weight, got, want, rel*100)
		}
	}
}

func mustSWRR(t testing.TB, ss []Server, loads []Load, o SWRROptions) *SWRR {
	t.Helper()
	p, err := NewSWRR(ss, loads, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustCHash(t testing.TB, ss []Server, loads []Load, o CHashOptions) *CHash {
	t.Helper()
	p, err := NewCHash(ss, loads, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustP2C(t testing.TB, ss []Server, loads []Load, o P2COptions) *P2C {
	t.Helper()
	p, err := NewP2C(ss, loads, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustNearest(t testing.TB, ss []Server, loads []Load, o NearestOptions) *Nearest {
	t.Helper()
	p, err := NewNearest(ss, loads, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// seeded returns a deterministic Rand for p2c.
func seeded(seed uint64) func() uint64 {
	r := rand.New(rand.NewPCG(seed, seed+1))
	return r.Uint64
}
