package stbload

import (
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/anysched/anysched/internal/stb/token"
)

// Profile is what the business platform would put in a viewer's token.
type Profile struct {
	DesiredKbps, DanmakuPerHour, Gift float64
}

// ViewerProfile draws viewer v's profile, reproducibly for a seed, from the
// the QoE allocation paper's statistics: 59% of viewers send one live comment an hour and 96%
// fewer than ten; desired bitrates 5000/2500/1200 kbps for 50/30/20% of
// viewers; four in five never give gifts, the others spend a log-normal
// amount (median 20).
func ViewerProfile(city string, v int, seed uint64) Profile {
	rng := rand.New(rand.NewPCG(seed^cityHash(city)^0x9e37, uint64(v)))
	p := Profile{DesiredKbps: 5000, DanmakuPerHour: 1}
	switch x := rng.Float64(); {
	case x < 0.2:
		p.DesiredKbps = 1200
	case x < 0.5:
		p.DesiredKbps = 2500
	}
	switch x := rng.Float64(); {
	case x >= 0.96:
		p.DanmakuPerHour = float64(10 + rng.IntN(21))
	case x >= 0.59:
		p.DanmakuPerHour = float64(2 + rng.IntN(8))
	}
	if rng.Float64() < 0.2 {
		p.Gift = math.Round(20 * math.Exp(rng.NormFloat64()))
	}
	return p
}

// Tokens returns an Options.Token that signs each viewer's profile with key,
// valid for ttl (issued now: ttl must be within the schedulers'
// alloc.max_token_lifetime).
func Tokens(key token.Key, ttl time.Duration, seed uint64) func(city string, viewer int) string {
	iat := time.Now()
	exp := iat.Add(ttl)
	return func(city string, v int) string {
		p := ViewerProfile(city, v, seed)
		s, err := token.Sign(key, token.Claims{
			Subject: city + "-stb-" + strconv.Itoa(v), IssuedAt: iat, Expires: exp,
			DesiredKbps: p.DesiredKbps, DanmakuPerHour: p.DanmakuPerHour, Gift: p.Gift,
		})
		if err != nil {
			return "" // cannot happen with a valid key; the STB then sends none
		}
		return s
	}
}
