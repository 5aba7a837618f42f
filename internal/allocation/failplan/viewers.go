package failplan

import (
	"time"

	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
)

// Viewers are a region's published sessions of QoE services, grouped by
// what the model and the plan can tell apart: service, place, profile,
// channel, and the server and bitrate each was last given. A city's plan
// state holds up to a million sessions; its viewers stand in a few
// thousand groups (places are zones), so the center reads each region's
// state, groups it and lets it go, rather than holding a province's
// millions of sessions at once.
type Viewers struct {
	Made    time.Time // when the state was published
	Count   int       // sessions
	groups  []viewerGroup
	chans   []string // by channel number
	servers []string // by server number
}

type viewerGroup struct {
	svc                              int32
	lat, lon, desired, danmaku, gift float64
	channel, server                  int32 // -1: none (not by channel; the fallback)
	kbps                             float64
	count                            int
}

// Summarize groups st's sessions of the QoE services snap knows; by
// channel only when byChannel (the model prices a channel's origin pull
// only with an origin cost): a city's 200 channels would otherwise split
// every group two hundred ways for nothing.
func Summarize(snap *topology.Snapshot, st *store.AllocState, byChannel bool) *Viewers {
	v := &Viewers{Made: st.Made}
	svcOf := make([]int32, len(st.Services))
	for i, ss := range st.Services {
		svcOf[i] = -1
		if s, ok := snap.Service(ss.Name); ok && snap.Services[s].Selection.OrDefault() == topology.SelectQoE {
			svcOf[i] = s
		}
	}
	chans := map[string]int32{}
	servers := make([]int32, len(st.Servers)) // st's index -> v.servers', made on first use
	for i := range servers {
		servers[i] = -1
	}
	at := map[viewerGroup]int{} // count 0 in keys
	for i := range st.Sessions {
		s := &st.Sessions[i]
		if s.Service < 0 || int(s.Service) >= len(svcOf) || svcOf[s.Service] < 0 {
			continue
		}
		ch := int32(-1)
		if byChannel {
			var ok bool
			if ch, ok = chans[s.Channel]; !ok {
				ch = int32(len(v.chans))
				chans[s.Channel] = ch
				v.chans = append(v.chans, s.Channel)
			}
		}
		g := viewerGroup{svc: svcOf[s.Service], lat: s.Lat, lon: s.Lon, desired: s.Desired, danmaku: s.Danmaku, gift: s.Gift, channel: ch, server: -1}
		if s.Server >= 0 && int(s.Server) < len(st.Servers) {
			if servers[s.Server] < 0 {
				servers[s.Server] = int32(len(v.servers))
				v.servers = append(v.servers, st.Servers[s.Server])
			}
			g.server, g.kbps = servers[s.Server], s.Kbps
		}
		v.Count++
		if j, ok := at[g]; ok {
			v.groups[j].count++
			continue
		}
		at[g] = len(v.groups)
		g.count = 1
		v.groups = append(v.groups, g)
	}
	return v
}

// Groups is how many groups the viewers stand in.
func (v *Viewers) Groups() int { return len(v.groups) }
