package balance

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// Config is the balance policy configuration an operator edits: it lives in
// etcd next to the topology and hot-reloads (decode with ParseConfig, build a
// Table, swap it into Live). Zero fields take the documented defaults.
//
//	panic_threshold: 0.3
//	key: {by: channel, query: [rendition]}
//	slow_start: {window: 60s, aggression: 1, min_share: 0.1}
//	adaptive: {enabled: true, alpha: 0.2, min: 0.1, max: 1.5}
//	swrr: {max_fails: 1}
//	chash: {virtual_nodes: 160, epsilon: 0.25, half_life: 60s, min_load: 1000}
//	p2c: {cpu_weight: 1, bandwidth_weight: 1, conn_weight: 1}
//	rank: {by: rtt_loss, rtt_ref: 20ms, panic_threshold: 0.3}
//	weights: {hefei-1-a: 50}
type Config struct {
	// Panic is the in-node panic threshold: a node with fewer healthy
	// servers than this fraction ignores health (0: never).
	Panic     float64         `yaml:"panic_threshold" json:"panic_threshold"`
	Key       KeyOptions      `yaml:"key" json:"key"`
	SlowStart SlowStart       `yaml:"slow_start" json:"slow_start"`
	Adaptive  AdaptiveOptions `yaml:"adaptive" json:"adaptive"`
	SWRR      SWRROptions     `yaml:"swrr" json:"swrr"`
	CHash     CHashOptions    `yaml:"chash" json:"chash"`
	P2C       P2COptions      `yaml:"p2c" json:"p2c"`
	Rank      RankOptions     `yaml:"rank" json:"rank"`
	// Weights overrides configured server weights by server name, so an
	// operator can drain (0) or favour a server without a topology apply.
	Weights map[string]float64 `yaml:"weights" json:"weights"`
}

// Equal reports whether c and o are the same policy (an engine built with
// one is the one built with the other). TestConfigEqualSeesEveryField
// fails when a field is added here but not compared.
func (c Config) Equal(o Config) bool {
	return c.Panic == o.Panic && c.Key.By == o.Key.By && slices.Equal(c.Key.Query, o.Key.Query) &&
		c.SlowStart == o.SlowStart && c.Adaptive == o.Adaptive && c.SWRR == o.SWRR && c.CHash == o.CHash &&
		c.P2C.equal(o.P2C) && c.Rank == o.Rank && maps.Equal(c.Weights, o.Weights)
}

// equal compares p2c options; a Rand source (tests') is never equal to
// another, as reflect.DeepEqual has it.
func (p P2COptions) equal(o P2COptions) bool {
	return p.CPUWeight == o.CPUWeight && p.BandwidthWeight == o.BandwidthWeight && p.ConnWeight == o.ConnWeight &&
		p.ConnRef == o.ConnRef && p.PickMbps == o.PickMbps && p.SlowStart == o.SlowStart && p.Panic == o.Panic &&
		p.Now == o.Now && p.Rand == nil && o.Rand == nil
}

// DefaultConfig is the configuration used when etcd holds none.
func DefaultConfig() Config {
	return Config{CHash: CHashOptions{Epsilon: 0.25}}
}

// ParseConfig decodes a YAML (or JSON) document over DefaultConfig, strictly
// (unknown keys are errors, each naming its field), and validates it.
func ParseConfig(data []byte) (Config, error) {
	c, err := ParseConfigPartial(data)
	if err != nil {
		return Config{}, err
	}
	return c, nil
}

// ParseConfigPartial is ParseConfig reporting every problem of the
// document at once, what did not decode and what is wrong with the values
// that did, and returning the policy as far as it decoded (a field that
// failed keeps its default), for checks of its own (the admin API's server
// names): an operator fixes a document in one pass. A value problem about
// a field that failed to decode is left out (it would be about the default).
func ParseConfigPartial(data []byte) (Config, error) {
	c := DefaultConfig()
	derr := yamlstrict.DecodePartial(data, &c)
	verr := c.Validate()
	if derr == nil {
		return c, verr
	}
	failed, ok := yamlstrict.AsErrors(derr)
	if !ok {
		return DefaultConfig(), derr // unreadable: nothing decoded
	}
	if values, ok := yamlstrict.AsErrors(verr); ok {
		failed = append(failed, values.Excluding(failed)...)
	}
	return c, failed.Err()
}

// Validate checks every field and reports all problems at once, each with
// its field path.
func (c Config) Validate() error {
	var errs yamlstrict.Errors
	frac := func(path string, v float64) {
		if !(v >= 0 && v <= 1) {
			errs.Add(path, "%v is not a fraction in [0, 1]", v)
		}
	}
	nonneg := func(path string, v float64) {
		if !(v >= 0) || math.IsInf(v, 1) {
			errs.Add(path, "%v must be a finite number >= 0", v)
		}
	}
	frac("panic_threshold", c.Panic)
	if c.Key.By > KeyPath {
		errs.Add("key.by", "unknown content key %d", c.Key.By)
	}
	for i, q := range c.Key.Query {
		if q == "" {
			errs.Add(fmt.Sprintf("key.query[%d]", i), "empty parameter name")
		}
	}
	if c.SlowStart.Window < 0 {
		errs.Add("slow_start.window", "%v is negative", c.SlowStart.Window)
	}
	nonneg("slow_start.aggression", c.SlowStart.Aggression)
	frac("slow_start.min_share", c.SlowStart.MinShare)
	nonneg("adaptive.loss_exponent", c.Adaptive.LossExponent)
	nonneg("adaptive.load_exponent", c.Adaptive.LoadExponent)
	frac("adaptive.alpha", c.Adaptive.Alpha)
	nonneg("adaptive.min", c.Adaptive.Min)
	nonneg("adaptive.max", c.Adaptive.Max)
	if err := c.Adaptive.validate(); err != nil {
		errs.Add("adaptive", "%v", err)
	}
	if c.SWRR.MaxFails < 0 {
		errs.Add("swrr.max_fails", "%d is negative", c.SWRR.MaxFails)
	}
	if c.CHash.VirtualNodes < 0 || c.CHash.VirtualNodes > 10000 {
		errs.Add("chash.virtual_nodes", "%d is not in [0, 10000]", c.CHash.VirtualNodes)
	}
	nonneg("chash.epsilon", c.CHash.Epsilon)
	if c.CHash.HalfLife < 0 {
		errs.Add("chash.half_life", "%v is negative", c.CHash.HalfLife)
	}
	nonneg("chash.min_load", c.CHash.MinLoad)
	if c.CHash.Window < 0 {
		errs.Add("chash.window", "%d is negative", c.CHash.Window)
	}
	nonneg("p2c.cpu_weight", c.P2C.CPUWeight)
	nonneg("p2c.bandwidth_weight", c.P2C.BandwidthWeight)
	nonneg("p2c.conn_weight", c.P2C.ConnWeight)
	nonneg("p2c.conn_ref", c.P2C.ConnRef)
	nonneg("p2c.pick_mbps", c.P2C.PickMbps)
	if c.Rank.By > RankRTTLoss {
		errs.Add("rank.by", "unknown ranking %d", c.Rank.By)
	}
	nonneg("rank.rtt_weight", c.Rank.RTTWeight)
	nonneg("rank.loss_weight", c.Rank.LossWeight)
	frac("rank.panic_threshold", c.Rank.Panic)
	nonneg("rank.max_utilisation", c.Rank.MaxUtilisation)
	for _, name := range slices.Sorted(maps.Keys(c.Weights)) {
		nonneg("weights."+name, c.Weights[name])
	}
	return errs.Err()
}
