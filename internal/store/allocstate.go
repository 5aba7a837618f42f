package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/opstate"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// AllocState is one QoE planner's plan of a region as it published it:
// the sessions with where they were sent, and the plan's prices. Whoever
// plans the region next starts from the freshest one, so viewers keep
// their server and bitrate across a failover and back.
type AllocState struct {
	Instance string    `json:"instance"`
	Made     time.Time `json:"made"`
	Revision int64     `json:"revision"` // of the topology the plan was made on
	// Servers and Services name what the sessions refer to by index.
	Servers  []string       `json:"servers"`
	Services []ServiceState `json:"services"`
	Sessions []SessionState `json:"sessions"`
}

// ServiceState is a service's part of the plan: the prices of its
// servers' capacities (by Servers index; zero when absent).
type ServiceState struct {
	Name   string       `json:"name"`
	Prices [][2]float64 `json:"prices,omitempty"` // bandwidth per kbps, compute per unit
}

// SessionState is one session (a viewer on one STB watching a channel).
// Short field names: a city's state holds up to a million of them.
type SessionState struct {
	Service int32      `json:"v"`           // Services index
	User    string     `json:"u,omitempty"` // the token's subject
	Addr    netip.Addr `json:"a"`
	Channel string     `json:"c"`
	Desired float64    `json:"d,omitempty"` // kbps
	Danmaku float64    `json:"f,omitempty"`
	Gift    float64    `json:"g,omitempty"`
	Lat     float64    `json:"la"`
	Lon     float64    `json:"lo"`
	Server  int32      `json:"s"` // Servers index; -1 for the fallback
	Kbps    float64    `json:"k"`
	Seen    int64      `json:"t"` // unix milliseconds of its last request
}

// statePart is one stored part: parts are written in order, each naming
// the generation it belongs to, so a reader takes only complete ones.
type statePart struct {
	Gen   int64       `json:"gen"` // Made in unix nanoseconds
	Part  int         `json:"part"`
	Parts int         `json:"parts"`
	State *AllocState `json:"state"` // part 0 carries everything but the later parts' sessions
}

// statePartSessions bounds one part (etcd refuses requests over 1.5 MiB).
const statePartSessions = 10_000

func (s *Store) statePrefix(region string) string {
	return s.prefix + opstate.PrefixAllocState + region + "/"
}

// PutAllocState publishes st as instance's state of region: parts first,
// then the deletion of the previous generation's extra parts.
func (s *Store) PutAllocState(ctx context.Context, region string, st *AllocState) error {
	gen := st.Made.UnixNano()
	n := max(1, (len(st.Sessions)+statePartSessions-1)/statePartSessions)
	base := s.statePrefix(region) + st.Instance + "/"
	for i := range n {
		part := &AllocState{Instance: st.Instance, Made: st.Made, Revision: st.Revision}
		if i == 0 {
			part.Servers, part.Services = st.Servers, st.Services
		}
		lo, hi := i*statePartSessions, min((i+1)*statePartSessions, len(st.Sessions))
		part.Sessions = st.Sessions[lo:hi]
		val, err := encodePart(statePart{Gen: gen, Part: i, Parts: n, State: part})
		if err != nil {
			return err
		}
		if _, err := s.cli.Put(ctx, fmt.Sprintf("%s%04d", base, i), val); err != nil {
			return fmt.Errorf("store: publish allocation state of %s: %w", region, err)
		}
	}
	if _, err := s.cli.Delete(ctx, fmt.Sprintf("%s%04d", base, n), clientv3.WithRange(clientv3.GetPrefixRangeEnd(base))); err != nil {
		return fmt.Errorf("store: publish allocation state of %s: %w", region, err)
	}
	return nil
}

// DeleteAllocState removes instance's state of region.
func (s *Store) DeleteAllocState(ctx context.Context, region, instance string) error {
	_, err := s.cli.Delete(ctx, s.statePrefix(region)+instance+"/", clientv3.WithPrefix())
	return err
}

// AllocState returns the freshest complete state of region published by
// an instance other than except (nil if none).
func (s *Store) AllocState(ctx context.Context, region, except string) (*AllocState, error) {
	resp, err := s.cli.Get(ctx, s.statePrefix(region), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("store: read allocation states of %s: %w", region, err)
	}
	type gen struct {
		parts map[int]*AllocState
		n     int
	}
	gens := map[string]map[int64]*gen{} // by instance, generation
	for _, kv := range resp.Kvs {
		inst, _, _ := strings.Cut(string(kv.Key[len(s.statePrefix(region)):]), "/")
		if inst == except {
			continue
		}
		p, err := decodePart(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("store: allocation state at %s: %w", kv.Key, err)
		}
		if gens[inst] == nil {
			gens[inst] = map[int64]*gen{}
		}
		g := gens[inst][p.Gen]
		if g == nil {
			g = &gen{parts: map[int]*AllocState{}, n: p.Parts}
			gens[inst][p.Gen] = g
		}
		g.parts[p.Part] = p.State
	}
	var best *AllocState
	for _, byGen := range gens {
		for _, g := range byGen {
			if len(g.parts) != g.n || g.parts[0] == nil {
				continue // being written: an older or another instance's will do
			}
			st := *g.parts[0]
			for i := 1; i < g.n; i++ {
				st.Sessions = append(st.Sessions, g.parts[i].Sessions...)
			}
			if best == nil || st.Made.After(best.Made) {
				best = &st
			}
		}
	}
	return best, nil
}

func encodePart(p statePart) (string, error) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if err := json.NewEncoder(zw).Encode(p); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return b.String(), nil
}

func decodePart(val []byte) (*statePart, error) {
	zr, err := gzip.NewReader(bytes.NewReader(val))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return nil, err
	}
	var p statePart
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	if p.State == nil || p.Parts < 1 || p.Part < 0 || p.Part >= p.Parts {
		return nil, fmt.Errorf("part %d of %d without a state", p.Part, p.Parts)
	}
	return &p, nil
}
