package config

import (
	"os"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// Health configures how a scheduler uses the checkers' verdicts: the
// merger's keys (merge, grace, panic_threshold; the health package owns
// them), and an embedded checker.
type Health struct {
	health.MergerOptions `yaml:",inline"`
	// Embedded runs a checker inside a regional scheduler (small sites).
	Embedded bool `yaml:"embedded"`
	// Check is the embedded checker's settings; the health package owns
	// them (keys, defaults, Validate).
	Check health.CheckerOptions `yaml:"check"`
}

// Checker is the healthcheck daemon's configuration.
type Checker struct {
	Base `yaml:",inline"`
	// Region whose servers to probe, and for which its verdicts count:
	// the region its etcd identity (the certificate's CN,
	// anysched-checker.<region>.<checker_id>) is bound to; center for a
	// province-wide checker. Servers, when set, narrows it to a list.
	Region  string   `yaml:"region"`
	Servers []string `yaml:"servers"`
	// CheckerID names this checker in its verdicts; default: hostname.
	CheckerID             string `yaml:"checker_id"`
	health.CheckerOptions `yaml:",inline"`
}

// DefaultChecker returns the healthcheck daemon's defaults.
func DefaultChecker() Checker {
	return Checker{Base: defaultBase("/var/lib/anysched/healthcheck", "127.0.0.1:9102"), CheckerOptions: health.DefaultCheckerOptions()}
}

// Validate checks the healthcheck daemon's configuration.
func (c *Checker) Validate() error {
	var errs yamlstrict.Errors
	if c.Region == "" {
		errs.Add("region", "required: the region whose servers to probe, which its etcd identity names (%s for a province-wide checker; servers only narrows it)", topology.CenterName)
	}
	if len(c.Etcd.Endpoints) == 0 {
		errs.Add("etcd.endpoints", "required: the checker publishes its verdicts to the province's etcd")
	}
	c.Base.validate(&errs, false)
	if c.Region != "" && c.Etcd.TLS.CertFile != "" {
		// A file that is no certificate is ClientTLS.validate's to report.
		if cn, err := certCN(c.Etcd.TLS.CertFile); err == nil {
			c.checkIdentity(&errs, cn)
		}
	}
	if es, ok := yamlstrict.AsErrors(c.CheckerOptions.Validate("")); ok {
		errs = append(errs, es...)
	}
	return errs.Err()
}

// checkIdentity checks the certificate's CN, the checker's etcd user:
// etcd lets it write verdicts only under the region it names (and its
// checker id), so another region or id would have every write refused.
func (c *Checker) checkIdentity(errs *yamlstrict.Errors, cn string) {
	id := c.CheckerID
	if id == "" {
		id, _ = os.Hostname() // as the daemon defaults it
	}
	want := etcdauth.CheckerPrefix + c.Region + "." + id
	parsed, err := etcdauth.ParseIdentity(cn)
	switch {
	case err != nil:
		errs.Add("etcd.tls.cert_file", "CN: %v", err)
	case parsed.Kind != etcdauth.Checker:
		errs.Add("etcd.tls.cert_file", "CN %q is a %s's: a checker's etcd certificate has CN %s", cn, parsed.Kind, want)
	case parsed.Name != want:
		errs.Add("etcd.tls.cert_file", "CN %q: this checker (region %q, checker_id %q) must have CN %s, the only identity etcd lets write its verdicts", cn, c.Region, id, want)
	}
}
