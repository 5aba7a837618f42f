// Package topology is the province model operators write (regions, edge nodes
// with their media servers, coverage zones, services), its strict decoding
// and validation, and the immutable Snapshot schedulers answer from.
package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/anysched/anysched/internal/wiring/yamlstrict"
	"gopkg.in/yaml.v3"
)

// Topology is one whole province, applied atomically.
type Topology struct {
	// Revision is the store revision this document was read at (written by
	// `schedctl get topology`); an apply carrying an older one is refused
	// unless forced. Zero means the document states no base revision.
	Revision int64     `yaml:"revision,omitempty" json:"revision,omitempty"`
	Anycast  Anycast   `yaml:"anycast" json:"anycast"`
	Regions  []Region  `yaml:"regions" json:"regions"`
	Nodes    []Node    `yaml:"nodes" json:"nodes"`
	Zones    []Zone    `yaml:"zones" json:"zones"`
	Services []Service `yaml:"services" json:"services"`
	// Pools name sets of servers by their labels, for services to select
	// and for health thresholds shared by a fleet.
	Pools []Pool `yaml:"pools,omitempty" json:"pools,omitempty"`
}

// Anycast holds the shared service address and the center's aggregate.
type Anycast struct {
	ServiceIP    string `yaml:"service_ip" json:"service_ip"`
	CenterPrefix string `yaml:"center_prefix" json:"center_prefix"`
	// ServiceIP6 and CenterPrefix6 are a dual-stack province's IPv6
	// service address and the center's IPv6 aggregate; ServiceIP is then
	// the IPv4 one. A single-family province (IPv4 or IPv6 only) writes
	// its one address in ServiceIP and leaves these out.
	ServiceIP6    string `yaml:"service_ip6,omitempty" json:"service_ip6,omitempty"`
	CenterPrefix6 string `yaml:"center_prefix6,omitempty" json:"center_prefix6,omitempty"`
	// DefaultService answers requests that name the service IP itself as
	// their host (http://198.18.0.1/...); empty: the first service.
	DefaultService string `yaml:"default_service,omitempty" json:"default_service,omitempty"`
}

// Location is a WGS84 point in degrees.
type Location struct {
	Lat float64 `yaml:"lat" json:"lat"`
	Lon float64 `yaml:"lon" json:"lon"`
}

// CenterName is how drills, instance ids and status name the central
// scheduler; no region may take it.
const CenterName = "center"

// Region is one city with its own regional scheduler.
type Region struct {
	Name     string    `yaml:"name" json:"name"`
	Location *Location `yaml:"location" json:"location"`
	// Fallback regions in order; the center is implicitly last.
	Fallback []string `yaml:"fallback,omitempty" json:"fallback,omitempty"`
}

// Node is an edge service node (cache group) in one region.
type Node struct {
	Name     string    `yaml:"name" json:"name"`
	Region   string    `yaml:"region" json:"region"`
	Location *Location `yaml:"location" json:"location"`
	Servers  []Server  `yaml:"servers" json:"servers"`
	// Labels apply to every server of the node (a server's own win).
	Labels Labels `yaml:"labels,omitempty" json:"labels,omitempty"`
}

// Server is one edge media server STBs are redirected to.
type Server struct {
	Name    string `yaml:"name" json:"name"`
	Address string `yaml:"address" json:"address"` // IP:port
	// Address6 is a dual-stack server's IPv6 [IP]:port; Address is then
	// its IPv4 one. An IPv6-only server writes its address in Address.
	Address6 string       `yaml:"address6,omitempty" json:"address6,omitempty"`
	Health   *HealthCheck `yaml:"health,omitempty" json:"health,omitempty"`
	// Weight is relative within a node; left out (0), DefaultWeight. A
	// document may not write 0 (see Weight.UnmarshalYAML).
	Weight          Weight    `yaml:"weight,omitempty" json:"weight,omitempty"`
	Location        *Location `yaml:"location,omitempty" json:"location,omitempty"` // defaults to the node's
	CoverageRadiusM float64   `yaml:"coverage_radius_m,omitempty" json:"coverage_radius_m,omitempty"`
	Capacity        Capacity  `yaml:"capacity,omitempty" json:"capacity,omitempty"`
	// Labels say what the server is for (fleet: vod, tier: premium);
	// services select servers by them. Added to the node's labels.
	Labels Labels `yaml:"labels,omitempty" json:"labels,omitempty"`
}

// Labels are a server's (or node's) key/value tags; keys and values are
// names (lowercase letters, digits, '-', '_', '.').
type Labels map[string]string

// HealthCheck says how agents probe a server and when its figures make it
// unavailable. On a pool it sets the thresholds of the pool's servers (a
// server's own thresholds win, field by field); url is per server only.
type HealthCheck struct {
	URL string `yaml:"url,omitempty" json:"url,omitempty"`
	// ExpectStatus is the HTTP status a healthy answer has; 0: any 2xx.
	ExpectStatus int `yaml:"expect_status,omitempty" json:"expect_status,omitempty"`
	// ExpectBody is a regular expression the answer's body (its first 64
	// KiB) must match; empty: any body.
	ExpectBody string `yaml:"expect_body,omitempty" json:"expect_body,omitempty"`
	// Thresholds on what the server reports (JSON stats; 0: none). Above
	// one of them the server takes no new STBs until it is back below.
	MaxCPU         float64 `yaml:"max_cpu,omitempty" json:"max_cpu,omitempty"`       // 0-1
	MaxMemory      float64 `yaml:"max_memory,omitempty" json:"max_memory,omitempty"` // 0-1
	MaxConnections int     `yaml:"max_connections,omitempty" json:"max_connections,omitempty"`
	MaxLoad        float64 `yaml:"max_load,omitempty" json:"max_load,omitempty"` // load average
}

// Pool is a named set of servers: every server whose labels include all of
// Match's (an empty Match: every server).
type Pool struct {
	Name  string `yaml:"name" json:"name"`
	Match Labels `yaml:"match" json:"match"`
	// Health thresholds for the pool's servers (no url).
	Health *HealthCheck `yaml:"health,omitempty" json:"health,omitempty"`
}

// Capacity of a server; zero means not stated.
type Capacity struct {
	BandwidthMbps  float64 `yaml:"bandwidth_mbps,omitempty" json:"bandwidth_mbps,omitempty"`
	TranscodeUnits float64 `yaml:"transcode_units,omitempty" json:"transcode_units,omitempty"`
}

// Zone maps client networks to a region and a location.
type Zone struct {
	Name     string    `yaml:"name" json:"name"`
	Region   string    `yaml:"region" json:"region"`
	Networks []string  `yaml:"networks" json:"networks"`
	Location *Location `yaml:"location,omitempty" json:"location,omitempty"` // defaults to the region's
}

// Service is a delivery service STBs ask for by hostname.
type Service struct {
	Name         string    `yaml:"name" json:"name"`
	Hostnames    []string  `yaml:"hostnames" json:"hostnames"`
	URLTemplate  string    `yaml:"url_template" json:"url_template"`
	BitratesKbps []int     `yaml:"bitrates_kbps" json:"bitrates_kbps"`
	Selection    Selection `yaml:"selection,omitempty" json:"selection,omitempty"` // empty: DefaultSelection
	// Channel says where the channel is in a request; nil: the first path
	// segment, keyed as the balance policy's key says.
	Channel *ChannelSpec `yaml:"channel,omitempty" json:"channel,omitempty"`
	// Pool (a pool's name) or Match (labels) selects the servers that
	// serve the service; neither: every server. A region with none of them
	// sends the service's STBs to its fallbacks.
	Pool  string `yaml:"pool,omitempty" json:"pool,omitempty"`
	Match Labels `yaml:"match,omitempty" json:"match,omitempty"`
	// Answers is how many locations a JSON or DNS answer lists, in
	// preference order (0: 1); a 302 names one.
	Answers int `yaml:"answers,omitempty" json:"answers,omitempty"`
	// AlternatesHeader adds the other locations to a 302 as
	// X-Anysched-Alternates (Answers > 1).
	AlternatesHeader bool `yaml:"alternates_header,omitempty" json:"alternates_header,omitempty"`
	// FamilyFallback says what a client of one address family gets when
	// the server chosen for it has no address of that family up:
	// FamilyOther (empty: the default) its other family's address,
	// FamilySkip a server that has one.
	FamilyFallback FamilyFallback `yaml:"family_fallback,omitempty" json:"family_fallback,omitempty"`
	// Overflow sends new STBs past a node (then a region) whose load is
	// over these thresholds; nil: never.
	Overflow *Overflow `yaml:"overflow,omitempty" json:"overflow,omitempty"`
	// Bypass takes new STBs out of the province (a national CDN) when
	// every node that could serve them is over the overflow thresholds;
	// nil: the client's region serves anyway.
	Bypass *Bypass `yaml:"bypass,omitempty" json:"bypass,omitempty"`
	// Rights allow or black out channels by place and time, first match
	// wins; none matching: allowed. Slate answers the blackouts of rules
	// without their own.
	Rights []Rule `yaml:"rights,omitempty" json:"rights,omitempty"`
	Slate  *Slate `yaml:"slate,omitempty" json:"slate,omitempty"`
	// Steering serves an HLS Content Steering manifest to the service's
	// playing sessions, so a drain, an overflow or a re-plan moves them
	// too; nil: off (a redirect decides once, at the start).
	Steering *Steering `yaml:"steering,omitempty" json:"steering,omitempty"`
}

// Overflow thresholds apply to each node, for the service's servers in it.
// A node overflows when any threshold is reached and takes new STBs again
// once every figure is below Resume times its threshold.
type Overflow struct {
	// BandwidthShare of the node's capacity in use (from health), 0-1.
	BandwidthShare float64 `yaml:"bandwidth_share,omitempty" json:"bandwidth_share,omitempty"`
	// ClaimsShare of the node's capacity claimed by the QoE planners, 0-1.
	ClaimsShare float64 `yaml:"claims_share,omitempty" json:"claims_share,omitempty"`
	// SessionsPerServer the QoE planner keeps on the node, per server.
	SessionsPerServer int `yaml:"sessions_per_server,omitempty" json:"sessions_per_server,omitempty"`
	// RPSPerServer: new STB requests per second this scheduler sends to
	// the node for the service, per server.
	RPSPerServer float64 `yaml:"rps_per_server,omitempty" json:"rps_per_server,omitempty"`
	// Resume is the hysteresis: 0 means 0.8.
	Resume float64 `yaml:"resume,omitempty" json:"resume,omitempty"`
}

// ChannelSpec says where a service's requests name their channel: the
// channel is {channel} in the URL template and, with the listed query
// parameters, the content key consistent hashing keeps on one server
// (after Traffic Router's consistentHashRegex and consistentHashQueryParams).
//
//	channel: {path: '^/PLTV/[^/]+/[^/]+/(?P<channel>[^/]+)/', query: [bitrate]}
//	channel: {query: [channel]}   # /play.m3u8?channel=CCTV1
type ChannelSpec struct {
	// Path is a regular expression (Go syntax) over the request path as
	// sent (percent-escapes as they are, leading '/'), with a group named
	// channel. Empty: the channel is the first listed query parameter.
	Path string `yaml:"path,omitempty" json:"path,omitempty"`
	// Query lists parameters whose values join the content key, in this
	// order (names compared exactly, first occurrence counts).
	Query []string `yaml:"query,omitempty" json:"query,omitempty"`
}

// MaxYAMLNodes bounds the YAML nodes of a document Decode accepts (as
// yamlstrict estimates them, at most about twice the real count): three
// times the province of docs/design.md (16 regions, 10,000 servers, 100,000
// networks: ~650,000), so parsing cannot take more than ~400 MB whatever
// the document's shape.
const MaxYAMLNodes = 2_000_000

// DefaultWeight is a server's weight when the document gives none.
const DefaultWeight = 100

// Weight is a server's weight in a document; 0 stands for "not given".
type Weight int

// errZeroWeight: operators read `weight: 0` as "no traffic", but 0 is how
// an omitted weight is stored, so it would silently mean DefaultWeight.
var errZeroWeight = fmt.Errorf("weight 0 is not allowed: omit it for the default %d, or drain the server (schedctl drain) for no traffic", DefaultWeight)

// UnmarshalYAML refuses an explicit `weight: 0` (yamlstrict reports it
// with the field path and line).
func (w *Weight) UnmarshalYAML(n *yaml.Node) error {
	var v int
	if err := n.Decode(&v); err != nil {
		return err
	}
	if v == 0 {
		return errZeroWeight
	}
	*w = Weight(v)
	return nil
}

// Decode reads a topology document strictly: unknown keys, wrong kinds and
// bad scalars are all reported with their field paths. It does not validate
// meaning; call Validate (or Compile) for that.
func Decode(data []byte) (*Topology, error) {
	t := new(Topology)
	if err := yamlstrict.DecodeLimited(data, t, yamlstrict.Limits{MaxNodes: MaxYAMLNodes}); err != nil {
		if es, ok := yamlstrict.AsErrors(err); ok {
			locate(data, es)
		}
		return nil, err
	}
	return t, nil
}

// Parse decodes and validates a document; every problem names its field
// path and line.
func Parse(data []byte) (*Topology, error) {
	t, _, _, err := DefaultLimits.Load(data)
	return t, err
}

// YAML renders the document as operators write it (2-space indentation).
func (t *Topology) YAML() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(t); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// EncodeJSON is the compact form kept in the store.
func (t *Topology) EncodeJSON() ([]byte, error) { return json.Marshal(t) }

// DecodeJSON reads the stored form. It is strict too: the store only ever holds
// documents this code wrote, so anything unexpected means corruption or a newer writer.
func DecodeJSON(data []byte) (*Topology, error) {
	t := new(Topology)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(t); err != nil {
		return nil, fmt.Errorf("topology: decode stored document: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("topology: decode stored document: data after the document")
	}
	return t, nil
}
