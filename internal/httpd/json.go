package httpd

import (
	"encoding/json"
	"net/http"
)

// Answer is the JSON form of a decision (?format=json or Accept:
// application/json), for operators and monitoring probes that want to see
// where an STB would be sent without following the redirect. Names are ""
// when the decision has none.
type Answer struct {
	Result       string `json:"result"` // CZ, DEFAULT, FALLBACK, MISS, ERROR
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
	BitrateKbps  int    `json:"bitrate_kbps"`
	Location     string `json:"location"` // the redirect URL; "" when there is none
	Instance     string `json:"instance"`
}

// json writes a as the body. Successful decisions are 200; MISS and ERROR
// keep their 404 and 503 so probes need not parse the body to see failure.
func (s *Server) json(w http.ResponseWriter, r *http.Request, status int, a *Answer) {
	body, _ := json.Marshal(a) // strings and ints only: cannot fail
	w.Header()["Content-Type"] = hdrJSON
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(append(body, '\n'))
	}
}
