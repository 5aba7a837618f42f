package daemon

import (
	"crypto/tls"
	"fmt"

	"github.com/anysched/anysched/internal/security/tlsutil"
	"github.com/anysched/anysched/internal/wiring/config"
)

// Listeners is where a daemon listens once bound (host:port; empty when
// off). With port 0 in the configuration it is what the kernel gave.
type Listeners struct {
	Admin, HTTP, HTTPS, DNS, GRPC, Etcd string
}

// Option adjusts how a daemon runs, for callers that embed one (tests).
type Option func(*Options)

// Options are a daemon's Options collected (CollectOptions).
type Options struct {
	onListening func(Listeners)
}

// OnListening is called once, when every listener of the daemon is bound
// and before any serves: with port 0 in the configuration, it is how the
// caller learns the ports.
func OnListening(f func(Listeners)) Option { return func(o *Options) { o.onListening = f } }

// CollectOptions applies opts in order.
func CollectOptions(opts []Option) Options {
	var o Options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Listening reports the bound listeners to the OnListening callback, if any.
func (o Options) Listening(l Listeners) {
	if o.onListening != nil {
		o.onListening(l)
	}
}

// AdminTLS is the admin listener's TLS (admin.tls), nil without.
func AdminTLS(c config.Admin) (*tls.Config, error) {
	if !c.TLS.Enabled() {
		return nil, nil
	}
	tc, err := tlsutil.Server(c.TLS)
	if err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("admin.tls: %w", err)}
	}
	return tc, nil
}
