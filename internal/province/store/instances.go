package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/instance"
	"github.com/anysched/anysched/internal/province/opstate"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Instance is one running scheduler as it registers itself.
type Instance struct {
	ID               string         `json:"id"`
	Role             instance.Role  `json:"role"`
	Region           string         `json:"region,omitempty"`
	Version          string         `json:"version"`
	Hostname         string         `json:"hostname,omitempty"`
	AdminAddress     string         `json:"admin_address,omitempty"`
	SnapshotRevision int64          `json:"snapshot_revision"`
	SnapshotDigest   string         `json:"snapshot_digest,omitempty"`
	SnapshotAge      float64        `json:"snapshot_age_seconds"`
	State            instance.State `json:"state"`
	Announced        bool           `json:"announced"`
	AnnounceWhy      string         `json:"announce_why,omitempty"` // why the route is not announced
	Announces        string         `json:"announces,omitempty"`    // the prefixes, space-separated (IPv4 first)
	// Routes: each address family's route, announced or why not (a
	// dual-stack scheduler announces one per family).
	Routes []Route  `json:"routes,omitempty"`
	Peers  []Peer   `json:"peers,omitempty"`
	QoE    *QoEPlan `json:"qoe,omitempty"`
	// Planning: the plans a center makes for cities whose schedulers are
	// gone (their STBs reach it), one per region.
	Planning []QoEPlan `json:"planning,omitempty"`
	// Traffic: a central scheduler's answers by the STBs' region, so that
	// a drill can count what every center answered, not only its own.
	Traffic   []RegionTraffic `json:"traffic,omitempty"`
	StartedAt time.Time       `json:"started_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// NotAnnouncedModeNone is the AnnounceWhy of a scheduler that announces
// nothing itself (announce.mode none): routing to it is the host's
// business, so while ready it serves whatever reaches it.
const NotAnnouncedModeNone = "announce.mode none"

// Covers reports whether the instance takes the STBs routing brings to it:
// its route is announced, or it is ready and routed by other means.
func (in Instance) Covers() bool {
	return in.Announced || (in.AnnounceWhy == NotAnnouncedModeNone && in.State == instance.Ready)
}

// QoEPlan summarises a regional scheduler's QoE allocation plan.
type QoEPlan struct {
	Region    string    `json:"region,omitempty"`
	Sessions  int       `json:"sessions"`
	Planned   int       `json:"planned"`
	Fallback  int       `json:"fallback"`
	Objective float64   `json:"objective"`
	Gap       float64   `json:"gap"`
	MadeAt    time.Time `json:"made_at"`
	Peers     int       `json:"peers"`
	// AtDesired is the share of the planned sessions on a server at or
	// above the bitrate their viewer desires (the top rung for none).
	AtDesired float64 `json:"at_desired"`
	// Switches and Drops count the sessions this plan moved to another
	// server, and put on a lower bitrate, than they had before it.
	Switches int `json:"switches"`
	Drops    int `json:"drops"`
	// Starved: sessions a server covers sent to the fallback for lack of
	// capacity.
	Starved int `json:"starved"`
	// SafeMode: the plan was made without reading the region's claims
	// (etcd unreachable).
	SafeMode bool `json:"safe_mode,omitempty"`
	// Idle: the instance received no STB of its region lately and holds
	// no capacity for it.
	Idle bool `json:"idle,omitempty"`
	// HeldKbps is the bandwidth this instance may use on the region's
	// servers (its claims, or in safe mode what its rank allows);
	// CapacityKbps the region's total.
	HeldKbps     float64 `json:"held_kbps"`
	CapacityKbps float64 `json:"capacity_kbps"`
	// Drain forecasts, per server and per node of the region, what a
	// drain of it would do to this instance's viewers at their next
	// request.
	Drain []DrainForecast `json:"drain,omitempty"`
}

// DrainForecast is what draining one server, or one node (all its servers
// at once), would do to the sessions an instance's plan keeps there: each
// is priced again, as its next request would be, without them.
type DrainForecast struct {
	Kind     opstate.DrainKind `json:"kind"` // server or node
	Name     string            `json:"name"`
	Sessions int               `json:"sessions"` // planned there
	// Where they would go: another server at the same bitrate (or a higher
	// one) or a lower one, or the region's fallback.
	SameRung   int `json:"same_rung"`
	LowerRung  int `json:"lower_rung"`
	ToFallback int `json:"to_fallback"`
	// ObjectiveDelta is the change of the plan's QoE objective: the moved
	// sessions' values after less before, switch and bitrate-drop losses
	// included.
	ObjectiveDelta float64 `json:"objective_delta"`
}

// RegionTraffic is what a scheduler answered to one region's STBs since it
// started (accesslog.RegionTraffic).
type RegionTraffic struct {
	ClientRegion string    `json:"client_region"`
	Answered     uint64    `json:"answered"`
	Failed       uint64    `json:"failed"`
	RunStart     time.Time `json:"run_start"`
	Last         time.Time `json:"last"`
}

// Peer is one BGP session of an instance.
// Route is one family's Anycast route of an instance.
type Route struct {
	Family    string `json:"family"` // ipv4, ipv6
	Prefix    string `json:"prefix,omitempty"`
	Announced bool   `json:"announced"`
	Why       string `json:"why,omitempty"`
}

// Peer is one BGP session of an instance.
type Peer struct {
	Address string `json:"address"`
	ASN     uint32 `json:"asn"`
	State   string `json:"state"`
}

// Key is in's registration key, relative to the prefix: under its
// region, or the province's for a central scheduler.
func (in Instance) Key() string {
	region := in.Region
	if in.Role == instance.Central {
		region = keyspace.ProvinceRegion
	}
	return keyspace.Instance(region, in.ID)
}

func (s *Store) instanceKey(in Instance) string { return s.prefix + in.Key() }

// fromKey makes a record say what its key says: the id, the region, and
// the role (central only under the province's region, which no city's etcd
// user may write). A record under the key of the release before
// (instances/<id>) keeps its region but is never central.
func fromKey(in Instance, key string) (Instance, bool) {
	region, id, legacy, ok := keyspace.ParseInstance(key)
	switch {
	case !ok:
		return in, false
	case legacy:
		in.ID = id
		if in.Role == instance.Central {
			in.Role = instance.Regional
		}
		return in, true
	case region == keyspace.ProvinceRegion:
		in.ID, in.Role, in.Region = id, instance.Central, ""
	default:
		in.ID, in.Role, in.Region = id, instance.Regional, region
	}
	return in, true
}

// Instances lists the registered scheduler instances, by role, region, id.
func (s *Store) Instances(ctx context.Context) ([]Instance, error) {
	resp, err := s.cli.Get(ctx, s.prefix+keyspace.PrefixInstances, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("store: list instances: %w", err)
	}
	out := make([]Instance, 0, len(resp.Kvs))
	keyed := map[string]bool{} // region/id of the records under their own key
	var old []Instance         // under the release before's key
	for _, kv := range resp.Kvs {
		var in Instance
		if err := json.Unmarshal(kv.Value, &in); err != nil {
			s.log.Warn("unreadable instance record", "key", string(kv.Key), "err", err)
			continue
		}
		key := strings.TrimPrefix(string(kv.Key), s.prefix)
		_, _, legacy, _ := keyspace.ParseInstance(key)
		in, ok := fromKey(in, key)
		switch {
		case !ok:
			s.log.Warn("instance record under a key of no known shape; ignored", "key", string(kv.Key))
		case legacy:
			old = append(old, in)
		default:
			keyed[in.Region+"/"+in.ID] = true
			out = append(out, in)
		}
	}
	// A city moving from the old key to its own leaves the old record
	// under the same lease for a moment: one record each.
	for _, in := range old {
		if !keyed[in.Region+"/"+in.ID] {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Role != b.Role {
			return a.Role < b.Role
		}
		if a.Region != b.Region {
			return a.Region < b.Region
		}
		return a.ID < b.ID
	})
	return out, nil
}

// Registration keeps one instance record alive under a lease: when the process
// dies the record vanishes after TTL, so `schedctl status` shows the living.
type Registration struct {
	Store    *Store
	TTL      time.Duration
	Interval time.Duration   // how often the record is refreshed
	Current  func() Instance // the record to publish, read at every refresh
	// Kick, if set, asks for a refresh now (a state change worth telling).
	Kick <-chan struct{}
	// Refresh, if longer than Interval: a record that changed only in
	// what moves all the time (UpdatedAt, SnapshotAge, the answer counts
	// and last answer of Traffic) is written again only this long after
	// the last write, any other change at once; meanwhile the lease is
	// kept alive every Interval without a write. A city scheduler's
	// record carries its plan's drain forecasts (tens of kB in a city of
	// 600 servers): written every 2 s, the province's records were 730
	// kB/s into etcd, more than everything else (bench/etcdload).
	Refresh time.Duration
}

// steady is the record without what moves all the time: two records the
// same here differ only in figures a reader can take a little late.
func (in Instance) steady() []byte {
	in.UpdatedAt, in.SnapshotAge = time.Time{}, 0
	in.Traffic = slices.Clone(in.Traffic)
	for i := range in.Traffic {
		in.Traffic[i].Answered, in.Traffic[i].Failed, in.Traffic[i].Last = 0, 0, time.Time{}
	}
	b, _ := json.Marshal(in)
	return b
}

// Run publishes the record until ctx ends, then deletes it.
func (r *Registration) Run(ctx context.Context) error {
	log := r.Store.log.With("component", "registration")
	ttl := max(int64(r.TTL/time.Second), 2)
	tick := time.NewTicker(r.Interval)
	defer tick.Stop()
	var lease clientv3.LeaseID
	var id string
	var written []byte // steady() of the record last written
	legacy := false    // registered under the release before's key
	var writtenAt time.Time
	failing := false
	for {
		in := r.Current()
		id = in.ID
		in.UpdatedAt = time.Now().UTC()
		err := func() error {
			// At least a second a round, however short the interval: a
			// write cut short by a loaded etcd may still be applied, and
			// is then written again (a revision more) for nothing.
			cctx, cancel := context.WithTimeout(ctx, max(r.Interval, time.Second))
			defer cancel()
			fresh := lease == 0
			if fresh {
				g, err := r.Store.cli.Grant(cctx, ttl)
				if err != nil {
					return err
				}
				lease = g.ID
			} else if _, err := r.Store.cli.KeepAliveOnce(cctx, lease); err != nil {
				if errors.Is(err, rpctypes.ErrLeaseNotFound) {
					lease = 0 // expired: grant anew next time
				}
				// Else (a slow etcd, a timeout) the record may still hang
				// on the lease: keep it, to refresh next time and to revoke
				// at stop, so a stopped instance's record goes at once.
				return err
			}
			steady := in.steady()
			if !fresh && bytes.Equal(steady, written) && in.UpdatedAt.Sub(writtenAt) < r.Refresh {
				return nil
			}
			val, _ := json.Marshal(in)
			_, err := r.Store.cli.Put(cctx, r.Store.instanceKey(in), string(val), clientv3.WithLease(lease))
			if errors.Is(err, rpctypes.ErrPermissionDenied) && in.Role != instance.Central {
				// An etcd role provisioned by the release before grants
				// only the old key: register there until it is provisioned
				// again (a reader takes it for a city's record).
				if !legacy {
					log.Warn("registering under the release before's key instances/<id>: this instance's etcd role does not grant instances/<region>/<id> yet; provision the roles with this release (schedctl etcd-roles, or upgrade the center)", "id", id)
				}
				legacy = true
				_, err = r.Store.cli.Put(cctx, r.Store.prefix+keyspace.LegacyInstance(in.ID), string(val), clientv3.WithLease(lease))
			} else if err == nil && legacy {
				legacy = false
				_, _ = r.Store.cli.Delete(cctx, r.Store.prefix+keyspace.LegacyInstance(in.ID))
			}
			if err != nil {
				written = nil
				return err
			}
			written, writtenAt = steady, in.UpdatedAt
			return nil
		}()
		if err != nil && ctx.Err() == nil && !failing {
			log.Warn("registering instance failed; retrying", "id", id, "err", err)
		}
		if err == nil && failing {
			log.Info("instance registered again", "id", id)
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			if lease != 0 {
				dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, _ = r.Store.cli.Revoke(dctx, lease)
				cancel()
			}
			return nil
		case <-tick.C:
		case <-r.Kick:
		}
	}
}
