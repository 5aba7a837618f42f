package etcdhousekeep

import (
	"time"

	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// DefaultKeepRevisions is keep_revisions' default, and the embedded
// member's own revision-mode auto-compaction (etcdserver), so that etcd's
// compactor never keeps less than the housekeeper.
const DefaultKeepRevisions = 100_000

// Config is the etcd.housekeeping section: how much history the center
// lets etcd keep, when it defragments, and whether it maintains at all.
// The retention rule: compact to the newer of "KeepRevisions revisions
// ago" and "MaxHistory ago", but never past "MinHistory ago", so that the
// history is at most KeepRevisions revisions and at most MaxHistory long
// (plus CompactInterval), yet a reader always has MinHistory to move from
// a listing to its watch.
type Config struct {
	// Maintain: compact, defragment and clear the NOSPACE alarm. It needs
	// etcd's root role for the center's etcd user (docs/security.md);
	// false: only watch (metrics, schedctl status, the alert).
	Maintain bool `yaml:"maintain"`
	// Interval is how often every member's status and the alarms are read.
	Interval time.Duration `yaml:"interval"`
	// CompactInterval is how often the history is compacted.
	CompactInterval time.Duration `yaml:"compact_interval"`
	// KeepRevisions bounds the history by revisions.
	KeepRevisions int64 `yaml:"keep_revisions"`
	// MaxHistory bounds the history by time: the province's plan state
	// is bytes per second, whatever the revisions.
	MaxHistory time.Duration `yaml:"max_history"`
	// MinHistory is never compacted: the feeds' list-then-watch and the
	// store's pointer-then-chunks reads need seconds.
	MinHistory time.Duration `yaml:"min_history"`
	// DefragFreeRatio: a member whose free space (db size less db size in
	// use) is at least this share of its quota is defragmented.
	DefragFreeRatio float64 `yaml:"defrag_free_ratio"`
	// DefragMinInterval is the least time between two defragmentation
	// rounds (a member answers nothing while it defragments); the NOSPACE
	// recovery does not wait for it.
	DefragMinInterval time.Duration `yaml:"defrag_min_interval"`
	// RecoverBelowRatio: NOSPACE is cleared only when, after compacting,
	// what every member has in use is below this share of its quota; else
	// disarming would only raise the alarm again, and the operator must
	// act (docs/operations.md).
	RecoverBelowRatio float64 `yaml:"recover_below_ratio"`
}

// DefaultConfig is the etcd.housekeeping section's defaults
// (docs/operations.md).
func DefaultConfig() Config {
	return Config{
		Maintain: true, Interval: 10 * time.Second, CompactInterval: time.Minute,
		KeepRevisions: DefaultKeepRevisions, MaxHistory: 5 * time.Minute, MinHistory: time.Minute,
		DefragFreeRatio: 0.1, DefragMinInterval: time.Hour, RecoverBelowRatio: 0.8,
	}
}

// Validate checks the fields a configuration file sets; path is where
// they sit in it ("etcd.housekeeping.").
func (c Config) Validate(path string) error {
	var errs yamlstrict.Errors
	if c.Interval < time.Second || c.Interval > 10*time.Minute {
		errs.Add(path+"interval", "%s is out of range [1s, 10m]", c.Interval)
	}
	if c.CompactInterval < c.Interval || c.CompactInterval > time.Hour {
		errs.Add(path+"compact_interval", "%s must be at least %sinterval %s and at most 1h", c.CompactInterval, path, c.Interval)
	}
	if c.KeepRevisions < 1000 {
		errs.Add(path+"keep_revisions", "%d must be >= 1000", c.KeepRevisions)
	}
	if c.MinHistory < 10*time.Second {
		errs.Add(path+"min_history", "%s must be >= 10s: readers move from a listing to its watch within it", c.MinHistory)
	}
	if c.MaxHistory < c.MinHistory || c.MaxHistory > 24*time.Hour {
		errs.Add(path+"max_history", "%s must be at least %smin_history %s and at most 24h", c.MaxHistory, path, c.MinHistory)
	}
	if !(c.DefragFreeRatio > 0 && c.DefragFreeRatio < 1) {
		errs.Add(path+"defrag_free_ratio", "%v is out of range (0, 1)", c.DefragFreeRatio)
	}
	if c.DefragMinInterval < time.Minute {
		errs.Add(path+"defrag_min_interval", "%s must be >= 1m", c.DefragMinInterval)
	}
	if !(c.RecoverBelowRatio > 0 && c.RecoverBelowRatio < 1) {
		errs.Add(path+"recover_below_ratio", "%v is out of range (0, 1)", c.RecoverBelowRatio)
	}
	return errs.Err()
}
