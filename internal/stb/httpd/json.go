package httpd

import "encoding/json"

// Answer is the JSON form of a decision (?format=json or Accept:
// application/json), for operators and monitoring probes that want to see
// where an STB would be sent without following the redirect. Names are ""
// when the decision has none.
type Answer struct {
	Result       string `json:"result"` // CZ, DEFAULT, GEO, FALLBACK, OVERFLOW, BLACKOUT, BYPASS, MISS, ERROR
	Reason       string `json:"reason,omitempty"`
	Client       string `json:"client"` // the address the decision was made for
	Host         string `json:"host"`
	Service      string `json:"service"`
	Zone         string `json:"zone"`
	ClientRegion string `json:"client_region"`
	Region       string `json:"region"`
	Node         string `json:"node"`
	Server       string `json:"server"`
	Address      string `json:"address"`
	// Family is the STB's address family (ipv4, ipv6), AddressFamily that
	// of Address: the other one under family_fallback other.
	Family        string `json:"family,omitempty"`
	AddressFamily string `json:"address_family,omitempty"`
	BitrateKbps   int    `json:"bitrate_kbps"`
	Location      string `json:"location"`       // the redirect URL; "" when there is none
	Rule          string `json:"rule,omitempty"` // the rights rule that decided
	Instance      string `json:"instance"`
	// Alternates are the further locations of a service with answers > 1,
	// in the order to try them.
	Alternates []Alternate `json:"alternates,omitempty"`
}

// Alternate is one further location of an answer.
type Alternate struct {
	Region   string `json:"region"`
	Node     string `json:"node"`
	Server   string `json:"server"`
	Address  string `json:"address"`
	Location string `json:"location"`
}

// jsonAnswer makes an the body of a. Successful decisions are 200; MISS and
// ERROR keep their 404 and 503 so probes need not parse the body to see
// failure. (The operator's path: it allocates, the STB's 302 does not.)
func (s *Server) jsonAnswer(a *answer, head bool, status int, an *Answer) {
	a.status, a.ctype = status, ctypeJSON
	if !head {
		body, _ := json.Marshal(an) // strings and ints only: cannot fail
		a.body = append(body, '\n')
	}
}
