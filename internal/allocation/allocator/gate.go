package allocator

import (
	"errors"
	"fmt"
	"math"
	"net/netip"

	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/stb/token"
	"github.com/prometheus/client_golang/prometheus"
)

// Gate is the viewer side of a QoE service without a plan: it checks the
// viewer token and picks the rung the viewer asked for. Every Allocator
// runs it first, and alone for the STBs of other cities and before its
// first plan; the center's planners of fallen cities share one, which also
// answers the requests none of them takes (an STB whose city scheduler is
// gone meets the same token rules there).
type Gate struct {
	auth     string
	verifier *token.Verifier
	def      qoe.Profile
	rejected *prometheus.CounterVec
}

// NewGate builds a gate; v may be nil (no keys: auth must be optional, and
// a request that carries a token anyway is refused, since it cannot be
// checked); reg may be nil.
func NewGate(auth string, v *token.Verifier, def qoe.Profile, reg prometheus.Registerer) (*Gate, error) {
	switch {
	case auth == "":
		auth = AuthOptional
	case auth != AuthOptional && auth != AuthRequired:
		return nil, fmt.Errorf("allocator: auth %q is not one of optional, required", auth)
	}
	if auth == AuthRequired && v == nil {
		return nil, errors.New("allocator: auth required but no token keys")
	}
	g := &Gate{auth: auth, verifier: v, def: def, rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "anysched_alloc_token_rejections_total", Help: "Requests refused (403) for their viewer token, by reason.",
	}, []string{"reason"})}
	for _, r := range append([]string{"missing"}, token.Reasons...) {
		g.rejected.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(g.rejected)
	}
	return g, nil
}

// ErrForbidden wraps every refusal of a request (answered 403).
var ErrForbidden = errors.New("forbidden")

var errTokenRequired = fmt.Errorf("%w: a viewer token is required", ErrForbidden)

// errNoKeys refuses a token this scheduler has no key to check.
var errNoKeys = fmt.Errorf("%w: this scheduler has no token keys", token.ErrUnknownKey)

// viewer verifies tok ("" for none), sent from client, and returns the
// viewer (the token's subject, "" without a token) and its profile over the
// default. Only an absent token is anonymous: one that is present and does
// not verify is refused whatever auth says, also without keys (else a
// forged profile would pass wherever keys were forgotten). An error wraps
// ErrForbidden.
func (g *Gate) viewer(tok string, client netip.Addr) (string, qoe.Profile, error) {
	prof := g.def
	if tok == "" {
		if g.auth == AuthRequired {
			g.rejected.WithLabelValues("missing").Inc()
			return "", prof, errTokenRequired
		}
		return "", prof, nil
	}
	c, err := token.Claims{}, errNoKeys
	if g.verifier != nil {
		c, err = g.verifier.VerifyFrom(tok, client)
	}
	if err != nil {
		g.rejected.WithLabelValues(token.Reason(err)).Inc()
		return "", prof, fmt.Errorf("%w: %v", ErrForbidden, err)
	}
	if !math.IsNaN(c.DesiredKbps) {
		prof.DesiredKbps = c.DesiredKbps
	}
	if !math.IsNaN(c.DanmakuPerHour) {
		prof.Danmaku = c.DanmakuPerHour
	}
	if !math.IsNaN(c.Gift) {
		prof.Gift = c.Gift
	}
	return c.Subject, prof, nil
}

// Allocate checks the token of a request to a QoE service and sets the
// decision's bitrate to the viewer's rung (Rung); the steer decision's
// server stands. Requests to other services pass untouched.
func (g *Gate) Allocate(eng *steer.Engine, d *steer.Decision, req steer.Request, tok string) error {
	snap := eng.Snapshot()
	if d.Service < 0 || snap.Services[d.Service].Selection != Selection {
		return nil
	}
	_, prof, err := g.viewer(tok, req.Client)
	if err != nil {
		return err
	}
	d.BitrateKbps = Rung(snap.Services[d.Service].BitratesKbps, prof.DesiredKbps)
	return nil
}

// Rung is the bitrate an unplanned answer gives a viewer who desires
// desired kbps: the lowest rung of the (ascending) ladder at or above it,
// the top rung when none is (or desired <= 0: no preference). The model's
// video quality is full from the desired bitrate up, so this is full
// quality at the least bandwidth, on a server no plan accounts for.
func Rung(ladder []int, desired float64) int {
	for _, b := range ladder {
		if desired > 0 && float64(b) >= desired {
			return b
		}
	}
	return ladder[len(ladder)-1]
}
