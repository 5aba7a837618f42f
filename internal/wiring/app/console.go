package app

import (
	"crypto/x509"
	"net"
	"net/http"

	"github.com/anysched/anysched/internal/admin/adminapi"
	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/admin/console"
	"github.com/anysched/anysched/internal/stb/netutil"
)

// MountConsole serves the operator console on the admin listener (and
// sends / there), calling svc through gate. A plaintext caller on a
// loopback admin listener is "local" with localRole, as on the gRPC
// listener; beyond loopback the configuration demands mutual TLS.
//
// roleCAs, if set, are the CAs whose certificates carry a role on the
// console (console.Config.RoleCAs).
func (s *Scheduler) MountConsole(svc *adminapi.Service, gate *adminapi.Gate, localRole authz.Role, readOnly bool, roleCAs *x509.CertPool) (*console.Console, error) {
	loopback := false
	if host, _, err := net.SplitHostPort(s.common.Admin.Listen); err == nil {
		loopback = netutil.LoopbackHost(host)
	}
	name := s.ID + " (" + s.Role.String() + ")" // "center (central)", "hefei-1 (regional)": an ID may repeat the role
	con, err := console.New(console.Config{Service: svc, Gate: gate, ReadOnly: readOnly, Loopback: loopback, LocalRole: localRole, RoleCAs: roleCAs,
		Gatherer: s.Registry, Scheduler: name, Logger: s.Logger.With("component", "console")})
	if err != nil {
		return nil, err
	}
	s.Admin.Extra[console.Prefix] = con.Handler()
	s.Admin.Extra["GET /{$}"] = http.RedirectHandler(console.Prefix, http.StatusFound)
	return con, nil
}
