package allocator

import (
	"time"

	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// MaxArrivalReserve bounds alloc.arrival_reserve. An idle instance still
// claims the reserve of every server and the instance taking the STBs
// plans around it, so above one half a standby would hold more of the
// city than the scheduler that serves it.
const MaxArrivalReserve = 0.5

// MaxTargetGap bounds alloc.target_gap: a plan certified only within a
// tenth of the optimum is not worth calling planned.
const MaxTargetGap = 0.1

func reserveInRange(r float64) bool { return r >= 0 && r <= MaxArrivalReserve }

// DefaultConfig is the alloc section's defaults (docs/operations.md).
func DefaultConfig() Config {
	return Config{
		Period: DefaultPeriod, SessionTTL: DefaultSessionTTL, MaxSessions: DefaultMaxSessions, TargetGap: DefaultTargetGap,
		Auth: AuthOptional, Default: DefaultProfile(), ArrivalReserve: 0.1, Params: qoe.DefaultParams(),
	}
}

// Validate checks the fields a configuration file sets; path is where they
// sit in it ("alloc."), so that each problem, and each key a problem
// names, reads as the operator wrote it. Zero durations that New fills in
// (solve_timeout, cold_solve_timeout, idle_after, state_interval) are valid.
func (c Config) Validate(path string) error {
	var errs yamlstrict.Errors
	if c.Period < time.Second || c.Period > 10*time.Minute {
		errs.Add(path+"period", "%s is out of range [1s, 10m]", c.Period)
	}
	if c.SessionTTL < c.Period {
		errs.Add(path+"session_ttl", "%s must be at least %speriod %s", c.SessionTTL, path, c.Period)
	}
	if c.SolveTimeout < 0 || (c.SolveTimeout > 0 && c.SolveTimeout >= c.Period) {
		errs.Add(path+"solve_timeout", "%s must be >= 0 and below %speriod %s", c.SolveTimeout, path, c.Period)
	}
	if c.ColdSolveTimeout < 0 || (c.ColdSolveTimeout > 0 && c.ColdSolveTimeout >= c.Period) {
		errs.Add(path+"cold_solve_timeout", "%s must be >= 0 and below %speriod %s", c.ColdSolveTimeout, path, c.Period)
	}
	if c.TargetGap <= 0 || c.TargetGap > MaxTargetGap {
		errs.Add(path+"target_gap", "%v is out of range (0, %g]", c.TargetGap, MaxTargetGap)
	}
	if c.MaxSessions < 1 {
		errs.Add(path+"max_sessions", "must be >= 1")
	}
	if c.Auth != AuthOptional && c.Auth != AuthRequired {
		errs.Add(path+"auth", "%q is not one of %s, %s", c.Auth, AuthOptional, AuthRequired)
	}
	if es, ok := yamlstrict.AsErrors(c.Default.Validate(path+"default_profile.", topology.MaxBitrateKbps)); ok {
		errs = append(errs, es...)
	}
	if es, ok := yamlstrict.AsErrors(c.Params.Validate(path + "model.")); ok {
		errs = append(errs, es...)
	}
	if !reserveInRange(c.ArrivalReserve) {
		errs.Add(path+"arrival_reserve", "%v is out of range [0, %g]", c.ArrivalReserve, MaxArrivalReserve)
	}
	if c.IdleAfter < 0 || (c.IdleAfter > 0 && c.IdleAfter < c.Period) {
		errs.Add(path+"idle_after", "%s must be 0 (2 periods) or at least %speriod %s", c.IdleAfter, path, c.Period)
	}
	if c.StateInterval < 0 || (c.StateInterval > 0 && c.StateInterval < c.Period) {
		errs.Add(path+"state_interval", "%s must be 0 (max(period, 30s)) or at least %speriod %s", c.StateInterval, path, c.Period)
	}
	return errs.Err()
}
