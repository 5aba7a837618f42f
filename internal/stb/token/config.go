package token

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// Config is how a scheduler verifies viewer tokens, as a configuration
// file gives it (the keys of the alloc section): the signing keys, each
// secret in its own file, and the verification Options.
type Config struct {
	Keys    []KeyFile `yaml:"keys"`
	Options `yaml:",inline"`
}

// KeyFile is one signing key; the secret stays in its own file.
type KeyFile struct {
	ID         string `yaml:"id"`
	SecretFile string `yaml:"secret_file"`
}

// DefaultConfig is the defaults of the keys a configuration file sets. A
// file's token is bounded to a day, where a program's zero MaxLifetime
// is no bound.
func DefaultConfig() Config {
	return Config{Options: Options{Leeway: 30 * time.Second, MaxLifetime: 24 * time.Hour, CacheSize: DefaultCacheSize}}
}

// DefaultCacheSize is the verified tokens a scheduler keeps by default:
// a city of a million viewers with tokens (about 350 bytes each, when
// that many are live).
const DefaultCacheSize = 1 << 20

// MaxCacheSize bounds token_cache.
const MaxCacheSize = 1 << 24

// Validate checks the keys a configuration file sets, each problem named
// by its key under path ("alloc."). It reads every secret file, so that a
// missing or short secret fails the start rather than the first token.
func (c Config) Validate(path string) error {
	var errs yamlstrict.Errors
	seen := map[string]bool{}
	for i, k := range c.Keys {
		p := fmt.Sprintf("%skeys[%d]", path, i)
		if k.ID == "" {
			errs.Add(p+".id", "required")
		} else if seen[k.ID] {
			errs.Add(p+".id", "duplicate key id %q", k.ID)
		}
		seen[k.ID] = true
		if k.SecretFile == "" {
			errs.Add(p+".secret_file", "required")
		} else if _, err := ReadSecret(k.SecretFile); err != nil {
			errs.Add(p+".secret_file", "%v", err)
		}
	}
	if c.CacheSize < 0 || c.CacheSize > MaxCacheSize {
		errs.Add(path+"token_cache", "%d is out of range [0, %d]", c.CacheSize, MaxCacheSize)
	}
	if c.Leeway < 0 || c.Leeway > 5*time.Minute {
		errs.Add(path+"leeway", "%s is out of range [0, 5m]", c.Leeway)
	}
	if c.MaxLifetime < time.Minute || c.MaxLifetime > 31*24*time.Hour {
		errs.Add(path+"max_token_lifetime", "%s is out of range [1m, 744h]", c.MaxLifetime)
	}
	for _, f := range []struct{ key, v string }{{"token_issuer", c.Issuer}, {"token_audience", c.Audience}} {
		if len(f.v) > 256 || strings.TrimSpace(f.v) != f.v || strings.ContainsFunc(f.v, unicode.IsControl) {
			errs.Add(path+f.key, "%q must be at most 256 bytes, without surrounding spaces or control characters", f.v)
		}
	}
	return errs.Err()
}

// ReadKeys reads the keys' secrets. An error names the key as the file
// does, under path ("alloc.").
func (c Config) ReadKeys(path string) ([]Key, error) {
	var out []Key
	for i, k := range c.Keys {
		secret, err := ReadSecret(k.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("%skeys[%d].secret_file: %w", path, i, err)
		}
		out = append(out, Key{ID: k.ID, Secret: secret})
	}
	return out, nil
}
