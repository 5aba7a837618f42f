package announce

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/anysched/anysched/internal/routing/announce/announcecfg"
)

// Family is an address family as metrics and status name it.
type Family = announcecfg.Family

// The families.
const (
	IPv4 = announcecfg.IPv4
	IPv6 = announcecfg.IPv6
)

// FamilyOf is the family of p.
func FamilyOf(p netip.Prefix) Family {
	if p.Addr().Unmap().Is4() {
		return IPv4
	}
	return IPv6
}

// Target is what one family of a scheduler should announce: the prefix, or
// why there is none (the province has no address of the family, the route
// safety check refused it, no router of the family hears this speaker).
type Target struct {
	Family Family
	Prefix netip.Prefix // valid when Err is nil
	Err    error
}

// FamilyState is one family's route as status and /readyz show it.
type FamilyState struct {
	Family    Family       `json:"family"`
	Prefix    netip.Prefix `json:"prefix,omitzero"`
	Announced bool         `json:"announced"`
	Why       string       `json:"why,omitempty"` // why it is not announced
}

// RouteError is a speaker's failure to announce or withdraw one route, so
// that the controller can tell which family failed.
type RouteError struct {
	Prefix   netip.Prefix
	Withdraw bool
	Err      error
}

func (e *RouteError) Error() string {
	verb := "announce"
	if e.Withdraw {
		verb = "withdraw"
	}
	return fmt.Sprintf("%s %s: %v", verb, e.Prefix, e.Err)
}

func (e *RouteError) Unwrap() error { return e.Err }

// failedRoutes maps each prefix a speaker's error names to its error; an
// error that names none is returned as rest.
func failedRoutes(err error) (failed map[netip.Prefix]error, rest error) {
	failed = map[netip.Prefix]error{}
	var others []error
	var walk func(error)
	walk = func(e error) {
		var re *RouteError
		switch j, ok := e.(interface{ Unwrap() []error }); {
		case ok:
			for _, x := range j.Unwrap() {
				walk(x)
			}
		case errors.As(e, &re):
			failed[re.Prefix] = re
		default:
			others = append(others, e)
		}
	}
	if err != nil {
		walk(err)
	}
	return failed, errors.Join(others...)
}
