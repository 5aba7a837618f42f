package topology

import (
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/gaissmai/bart"
)

// Rule is one content-rights rule of a service: requests for a channel the
// rule names, from a place it names, within its window, are allowed or
// blacked out. A service's rules are tried in order; the first that
// matches decides; none matching: allowed.
type Rule struct {
	// Name labels the rule in explain and the access log (optional).
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Channels are channel names ({channel} of a request), each exact or a
	// prefix ending in '*'; empty: every channel. A DNS query names no
	// channel, so only rules without channels apply to it.
	Channels []string `yaml:"channels,omitempty" json:"channels,omitempty"`
	// Regions, Zones and Networks are the places the rule covers (any of
	// them: a union); all empty: the whole province. A region is where
	// the scheduler placed the STB (its zone's region, GeoIP, the default).
	Regions  []string `yaml:"regions,omitempty" json:"regions,omitempty"`
	Zones    []string `yaml:"zones,omitempty" json:"zones,omitempty"`
	Networks []string `yaml:"networks,omitempty" json:"networks,omitempty"`
	// Action is allow or blackout.
	Action string `yaml:"action" json:"action"`
	// From and Until (RFC 3339) bound when the rule applies: from
	// inclusive, until exclusive; empty: unbounded.
	From  string `yaml:"from,omitempty" json:"from,omitempty"`
	Until string `yaml:"until,omitempty" json:"until,omitempty"`
	// Slate answers the rule's blackouts instead of the service's.
	Slate *Slate `yaml:"slate,omitempty" json:"slate,omitempty"`
}

// Rights actions.
const (
	ActionAllow    = "allow"
	ActionBlackout = "blackout"
)

// Slate is where a blacked-out STB is sent.
type Slate struct {
	// URL is the HTTP redirect target, a template in the url_template
	// language without the server placeholders ({server}, {host},
	// {port}): http://slate.example.net/blackout/{channel}.m3u8
	URL string `yaml:"url,omitempty" json:"url,omitempty"`
	// Addresses answer DNS queries: at most one IPv4 (A) and one IPv6
	// (AAAA) address of a slate server; none: an empty answer (NODATA).
	Addresses []string `yaml:"addresses,omitempty" json:"addresses,omitempty"`
}

// Bypass takes a service's new STBs out of the province when every node
// that could serve them is over the service's overflow thresholds.
type Bypass struct {
	// URLTemplate is the HTTP redirect target, the url_template language
	// without the server placeholders; {region} is the STB's region.
	URLTemplate string `yaml:"url_template,omitempty" json:"url_template,omitempty"`
	// CNAME answers DNS queries (the national CDN's name for the service).
	CNAME string `yaml:"cname,omitempty" json:"cname,omitempty"`
}

// MaxRules bounds a service's rights rules: a match ORs rule sets of this
// many bits, and a list longer than this is a calendar, not a policy.
const MaxRules = 256

// RuleSet is a set of a service's rules, by index.
type RuleSet [MaxRules / 64]uint64

func (s *RuleSet) add(i int)     { s[i>>6] |= 1 << (uint(i) & 63) }
func (s *RuleSet) or(o *RuleSet) { s[0], s[1], s[2], s[3] = s[0]|o[0], s[1]|o[1], s[2]|o[2], s[3]|o[3] }
func (s *RuleSet) empty() bool   { return s[0]|s[1]|s[2]|s[3] == 0 }
func (s *RuleSet) first(from int) int { // the first member >= from, -1 when none
	for w := from >> 6; w < len(s); w++ {
		m := s[w]
		if w == from>>6 {
			m &= ^uint64(0) << (uint(from) & 63)
		}
		if m != 0 {
			return w<<6 + bits.TrailingZeros64(m)
		}
	}
	return -1
}

// Rights is a service's rules compiled (ServiceView.Rights). Match does
// not allocate.
type Rights struct {
	Rules    []RuleView
	anywhere RuleSet   // rules with no place: they cover every client
	byRegion []RuleSet // by region index
	byZone   []RuleSet // by zone index
	networks *bart.Table[RuleSet]
}

// RuleView is a compiled rule.
type RuleView struct {
	Index    int
	Name     string
	Label    string // "0" or "0 (name)": how logs and explain name it
	Blackout bool
	exact    []string // channel names
	prefix   []string // channel prefixes ('*' dropped)
	anyChan  bool     // no channels: every channel, and DNS
	From     int64    // Unix ns; 0: unbounded
	Until    int64    // Unix ns; 0: unbounded
	Slate    *SlateView
}

// SlateView is a slate compiled: its template and DNS addresses.
type SlateView struct {
	URL      string
	Template Template
	A, AAAA  netip.Addr // invalid: none
	// AText and AAAAText are A and AAAA formatted once, for the access log.
	AText, AAAAText string
}

// Active reports whether now (Unix ns) is within the rule's window.
func (r *RuleView) Active(now int64) bool {
	return (r.From == 0 || now >= r.From) && (r.Until == 0 || now < r.Until)
}

// Covers reports whether the rule names channel ("" for a request that
// names none: a DNS query, or a path without one).
func (r *RuleView) Covers(channel string) bool {
	if r.anyChan {
		return true
	}
	if channel == "" {
		return false
	}
	for _, c := range r.exact {
		if c == channel {
			return true
		}
	}
	for _, p := range r.prefix {
		if strings.HasPrefix(channel, p) {
			return true
		}
	}
	return false
}

// candidates is the set of rules whose places cover a client in region
// and zone (indices, -1 for none) at addr.
func (rt *Rights) candidates(region, zone int32, addr netip.Addr) RuleSet {
	set := rt.anywhere
	if region >= 0 && int(region) < len(rt.byRegion) {
		set.or(&rt.byRegion[region])
	}
	if zone >= 0 && int(zone) < len(rt.byZone) {
		set.or(&rt.byZone[zone])
	}
	if rt.networks != nil && addr.IsValid() {
		if s, ok := rt.networks.Lookup(addr.Unmap()); ok {
			set.or(&s)
		}
	}
	return set
}

// Match returns the index of the first rule covering the client (see
// candidates), the channel and now (Unix ns; read only when a candidate
// has a window), or -1: no rule matches, the request is allowed.
func (rt *Rights) Match(region, zone int32, addr netip.Addr, channel string, now func() int64) int32 {
	if len(rt.Rules) == 0 {
		return -1
	}
	set := rt.candidates(region, zone, addr)
	if set.empty() {
		return -1
	}
	var t int64
	for i := set.first(0); i >= 0; i = set.first(i + 1) {
		r := &rt.Rules[i]
		if !r.Covers(channel) {
			continue
		}
		if r.From != 0 || r.Until != 0 {
			if t == 0 {
				t = now()
			}
			if !r.Active(t) {
				continue
			}
		}
		return int32(i)
	}
	return -1
}

// Networks lists the networks the rules name (each once).
func (rt *Rights) Networks() []netip.Prefix {
	if rt.networks == nil {
		return nil
	}
	out := make([]netip.Prefix, 0, rt.networks.Size())
	for p := range rt.networks.All() {
		out = append(out, p)
	}
	return out
}

// Rule returns rule (an index into its Rules, as a Decision carries it) of
// service's rights, nil for -1.
func (s *Snapshot) Rule(service, rule int32) *RuleView {
	if service < 0 || rule < 0 {
		return nil
	}
	return &s.Services[service].Rights.Rules[rule]
}

// rights checks and compiles the rights, slate and bypass of service sv at
// path p into view.
func (c *compiler) rights(p string, sv *Service, view *ServiceView) {
	var svcSlate *SlateView
	if sv.Slate != nil {
		svcSlate = c.slate(p+".slate", sv.Slate)
	}
	if sv.Bypass != nil {
		view.Bypass = c.bypass(p+".bypass", sv.Bypass, sv.Overflow != nil)
	}
	if len(sv.Rights) > MaxRules {
		c.add(p+".rights", "%d rules; at most %d", len(sv.Rights), MaxRules)
		return
	}
	rt := &view.Rights
	names := map[string]int{}
	nets := map[netip.Prefix]RuleSet{}
	for i := range sv.Rights {
		r := &sv.Rights[i]
		rp := p + "." + at("rights", i, r.Name)
		rv := RuleView{Index: i, Name: r.Name, Label: fmt.Sprint(i)}
		if r.Name != "" {
			rv.Label += " (" + r.Name + ")"
			if c.name(rp+".name", r.Name) {
				if j, dup := names[r.Name]; dup {
					c.add(rp+".name", "duplicate rule %q (first at rights[%d])", r.Name, j)
				} else {
					names[r.Name] = i
				}
			}
		}
		switch r.Action {
		case ActionAllow:
		case ActionBlackout:
			rv.Blackout = true
		case "":
			c.add(rp+".action", "required (allow or blackout)")
		default:
			c.add(rp+".action", "%q is not allow or blackout", r.Action)
		}
		rv.anyChan = len(r.Channels) == 0
		for j, ch := range r.Channels {
			if msg := channelPatternProblem(ch); msg != "" {
				c.add(fmt.Sprintf("%s.channels[%d]", rp, j), "%s", msg)
				continue
			}
			switch {
			case ch == "*":
				rv.anyChan = true
			case strings.HasSuffix(ch, "*"):
				rv.prefix = append(rv.prefix, strings.TrimSuffix(ch, "*"))
			default:
				rv.exact = append(rv.exact, ch)
			}
		}
		rv.From = c.instant(rp+".from", r.From)
		rv.Until = c.instant(rp+".until", r.Until)
		if rv.From != 0 && rv.Until != 0 && rv.Until <= rv.From {
			c.add(rp+".until", "%s is not after from (%s)", r.Until, r.From)
		}
		rv.Slate = svcSlate
		if r.Slate != nil {
			rv.Slate = c.slate(rp+".slate", r.Slate).or(svcSlate)
		}
		if rv.Blackout && (rv.Slate == nil || rv.Slate.URL == "") {
			c.add(rp, "a blackout needs a slate url (its own slate.url or the service's) to send HTTP STBs to")
		}
		if !rv.Blackout && r.Slate != nil {
			c.add(rp+".slate", "only a blackout rule has a slate")
		}
		if len(r.Regions)+len(r.Zones)+len(r.Networks) == 0 {
			rt.anywhere.add(i)
		}
		for j, name := range r.Regions {
			ri, ok := c.s.regionIdx[name]
			if !ok {
				c.add(fmt.Sprintf("%s.regions[%d]", rp, j), "unknown region %q%s", name, c.didYouMean(name, c.regionNames()))
				continue
			}
			if rt.byRegion == nil {
				rt.byRegion = make([]RuleSet, len(c.s.Regions))
			}
			rt.byRegion[ri].add(i)
		}
		for j, name := range r.Zones {
			zi, ok := c.s.zoneIdx[name]
			if !ok {
				zones := make([]string, len(c.t.Zones))
				for k, z := range c.t.Zones {
					zones[k] = z.Name
				}
				c.add(fmt.Sprintf("%s.zones[%d]", rp, j), "unknown zone %q%s", name, c.didYouMean(name, zones))
				continue
			}
			if rt.byZone == nil {
				rt.byZone = make([]RuleSet, len(c.s.Zones))
			}
			rt.byZone[zi].add(i)
		}
		for j, n := range r.Networks {
			if pfx, ok := c.prefix(fmt.Sprintf("%s.networks[%d]", rp, j), n); ok {
				s := nets[pfx]
				s.add(i)
				nets[pfx] = s
			}
		}
		rt.Rules = append(rt.Rules, rv)
	}
	if len(nets) > 0 {
		// Each network holds the rules of every network containing it, so
		// that the longest-prefix lookup alone finds all the rules
		// covering an address.
		plain := new(bart.Table[RuleSet])
		for pfx, s := range nets {
			plain.Insert(pfx, s)
		}
		rt.networks = new(bart.Table[RuleSet])
		for pfx := range nets {
			var s RuleSet
			for _, sup := range plain.Supernets(pfx) {
				s.or(&sup)
			}
			rt.networks.Insert(pfx, s)
		}
	}
}

// prefix checks a CIDR prefix as zones' networks are checked.
func (c *compiler) prefix(path, n string) (netip.Prefix, bool) {
	pfx, err := netip.ParsePrefix(n)
	switch {
	case err != nil:
		c.add(path, "not a CIDR prefix: %q", n)
	case pfx.Masked() != pfx:
		c.add(path, "host bits set: %q (did you mean %s?)", n, pfx.Masked())
	case pfx.Addr().Is4In6():
		c.add(path, "%s is IPv4-mapped: write it as IPv4", n)
	default:
		return pfx, true
	}
	return netip.Prefix{}, false
}

// instant parses an RFC 3339 time into Unix ns; 0 when empty or invalid.
func (c *compiler) instant(path, v string) int64 {
	if v == "" {
		return 0
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		c.add(path, "not an RFC 3339 time (2026-12-06T18:00:00Z): %q", v)
		return 0
	}
	if t.Year() < 2000 || t.Year() > 2200 {
		c.add(path, "%s is out of range [2000, 2200]", v)
		return 0
	}
	return t.UnixNano()
}

// channelPatternProblem says what is wrong with a rule's channel pattern.
func channelPatternProblem(ch string) string {
	switch {
	case ch == "":
		return "empty channel pattern (leave channels out for every channel)"
	case len(ch) > 256:
		return "longer than 256 characters"
	case strings.IndexByte(ch, '*') >= 0 && strings.IndexByte(ch, '*') != len(ch)-1:
		return fmt.Sprintf("%q: '*' may only end a pattern (a prefix)", ch)
	case strings.ContainsAny(ch, "/?# \t"):
		return fmt.Sprintf("%q: a channel holds no '/', '?', '#' or space", ch)
	}
	return ""
}

// redirectTemplate checks a slate or bypass URL template: the url_template
// language, without the server placeholders (there is no server).
func (c *compiler) redirectTemplate(path, tpl string) Template {
	if !strings.HasPrefix(tpl, "http://") && !strings.HasPrefix(tpl, "https://") {
		c.add(path, "must start with http:// or https://: %q", tpl)
		return nil
	}
	t, unknown, err := parseTemplate(tpl)
	if err != nil {
		c.add(path, "%v", err)
		return nil
	}
	ok := true
	for _, name := range unknown {
		c.add(path, "%v", unknownPlaceholder(name))
		ok = false
	}
	for _, pl := range []Placeholder{PlaceServer, PlaceHost, PlacePort} {
		if t.Has(pl) {
			c.add(path, "{%s} names an edge server; this URL has none", pl)
			ok = false
		}
	}
	if !ok {
		return nil
	}
	return t
}

// or fills what a rule's slate leaves out from the service's (def).
func (v *SlateView) or(def *SlateView) *SlateView {
	if def == nil {
		return v
	}
	if v.URL == "" {
		v.URL, v.Template = def.URL, def.Template
	}
	if !v.A.IsValid() && !v.AAAA.IsValid() {
		v.A, v.AAAA, v.AText, v.AAAAText = def.A, def.AAAA, def.AText, def.AAAAText
	}
	return v
}

func (c *compiler) slate(path string, s *Slate) *SlateView {
	v := &SlateView{URL: s.URL}
	if s.URL != "" {
		v.Template = c.redirectTemplate(path+".url", s.URL)
	}
	if len(s.Addresses) > 2 {
		c.add(path+".addresses", "%d addresses; at most one IPv4 and one IPv6", len(s.Addresses))
	}
	for j, a := range s.Addresses {
		ap := fmt.Sprintf("%s.addresses[%d]", path, j)
		ip, err := netip.ParseAddr(a)
		switch {
		case err != nil || ip.Zone() != "" || ip.IsUnspecified():
			c.add(ap, "not an IP address: %q", a)
		case ip.Is4In6():
			c.add(ap, "%s is an IPv4-mapped address: write it as IPv4", a)
		case ip == c.s.ServiceIP:
			c.add(ap, "%s is the anycast service address; the slate would loop", a)
		case ip.Is4() && v.A.IsValid(), ip.Is6() && v.AAAA.IsValid():
			c.add(ap, "a second address of the same family (%s)", a)
		case ip.Is4():
			v.A, v.AText = ip, ip.String()
		default:
			v.AAAA, v.AAAAText = ip, ip.String()
		}
	}
	if s.URL == "" && len(s.Addresses) == 0 {
		c.add(path, "sets neither url nor addresses")
	}
	return v
}

// BypassView is a service's bypass compiled.
type BypassView struct {
	URL      string
	Template Template // nil: no HTTP bypass
	CNAME    string   // normalised; "": no DNS bypass
}

func (c *compiler) bypass(path string, b *Bypass, overflow bool) *BypassView {
	v := &BypassView{URL: b.URLTemplate}
	if !overflow {
		c.add(path, "needs overflow thresholds: the bypass takes what overflows the whole province")
	}
	if b.URLTemplate == "" && b.CNAME == "" {
		c.add(path, "sets neither url_template nor cname")
	}
	if b.URLTemplate != "" {
		v.Template = c.redirectTemplate(path+".url_template", b.URLTemplate)
	}
	if b.CNAME != "" {
		norm, ok := NormalizeHost(b.CNAME)
		switch {
		case !ok:
			c.add(path+".cname", "not a valid DNS name: %q", b.CNAME)
		default:
			v.CNAME = norm
		}
	}
	return v
}

// rightsFields appends the diff lines of two versions of a service's
// rights, slate and bypass: one line per rule that differs, by index (the
// order is the meaning: first match wins).
func rightsFields(out []string, a, b *Service) []string {
	for i := range max(len(a.Rights), len(b.Rights)) {
		out = field(out, fmt.Sprintf("rights[%d]", i), ruleAt(a.Rights, i), ruleAt(b.Rights, i))
	}
	out = field(out, "slate", slateString(a.Slate), slateString(b.Slate))
	return field(out, "bypass", bypassString(a.Bypass), bypassString(b.Bypass))
}

func ruleAt(rs []Rule, i int) string {
	if i >= len(rs) {
		return "(none)"
	}
	return rs[i].String()
}

// String is the rule on one line, as diffs and the console show it:
// "blackout cctv5* in regions=[north] 2026-12-06T18:00:00Z..2026-12-06T21:00:00Z (derby)".
func (r *Rule) String() string {
	var b strings.Builder
	b.WriteString(orNone(r.Action))
	b.WriteByte(' ')
	if len(r.Channels) == 0 {
		b.WriteString("every channel")
	} else {
		b.WriteString(strings.Join(r.Channels, ","))
	}
	if len(r.Regions)+len(r.Zones)+len(r.Networks) == 0 {
		b.WriteString(" everywhere")
	} else {
		b.WriteString(" in")
		for _, kv := range []struct {
			k string
			v []string
		}{{"regions", r.Regions}, {"zones", r.Zones}, {"networks", r.Networks}} {
			if len(kv.v) > 0 {
				b.WriteString(" " + kv.k + "=" + list(kv.v))
			}
		}
	}
	if r.From != "" || r.Until != "" {
		b.WriteString(" " + r.From + ".." + r.Until)
	}
	if r.Slate != nil {
		b.WriteString(" slate=" + slateString(r.Slate))
	}
	if r.Name != "" {
		b.WriteString(" (" + r.Name + ")")
	}
	return b.String()
}

func slateString(s *Slate) string {
	if s == nil {
		return "(none)"
	}
	return strings.TrimSpace(s.URL + " " + strings.Join(s.Addresses, ","))
}

func bypassString(b *Bypass) string {
	if b == nil {
		return "(none)"
	}
	return strings.TrimSpace(b.URLTemplate + " " + b.CNAME)
}

// ActiveAt reports whether the rule's window (as written) holds t; a
// bound that does not parse counts as none (a valid document has none).
func (r *Rule) ActiveAt(t time.Time) bool {
	if f, err := time.Parse(time.RFC3339, r.From); err == nil && t.Before(f) {
		return false
	}
	if u, err := time.Parse(time.RFC3339, r.Until); err == nil && !t.Before(u) {
		return false
	}
	return true
}

// rightsChanged lists the changed services whose rights, slate or bypass
// changed.
func (c *Changes) rightsChanged() []string {
	var out []string
	if s := c.Section(KindServices); s != nil {
		for _, ch := range s.Changed {
			if slices.ContainsFunc(ch.Fields, func(f string) bool {
				return strings.HasPrefix(f, "rights[") || strings.HasPrefix(f, "slate:") || strings.HasPrefix(f, "bypass:")
			}) {
				out = append(out, ch.Name)
			}
		}
	}
	return out
}
