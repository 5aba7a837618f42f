package store_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/anysched/anysched/internal/province/store"
)

// sim is a planner's sessions changing between publications, as in a
// city at prime time: channel changes, departures and arrivals, moves to
// other servers or bitrates, requests (Seen), prices.
type sim struct {
	rng  *rand.Rand
	st   *AllocState
	next int
	now  time.Time
}

func newSim(seed uint64, n int) *sim {
	s := &sim{rng: rand.New(rand.NewPCG(seed, 7)), now: time.Unix(1_800_000_000, 123_456_789)}
	s.st = &AllocState{Instance: "hefei-1", Made: s.now, Revision: 3,
		Servers:  []string{"hefei-1-a", "hefei-1-b", "hefei-2-a", "hefei-2-b"},
		Services: []ServiceState{{Name: "live", Prices: [][2]float64{{1e-4, 0}, {2e-4, 0.5}, {0, 0}, {3e-5, 1}}}, {Name: "vod"}}}
	for range n {
		s.st.Sessions = append(s.st.Sessions, s.session())
	}
	return s
}

func (s *sim) session() SessionState {
	s.next++
	i := s.next
	addr := netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)})
	switch i % 17 {
	case 3:
		addr = netip.MustParseAddr(fmt.Sprintf("2001:db8::%x:%x", i>>16, i&0xffff))
	case 5:
		addr = netip.MustParseAddr(fmt.Sprintf("fe80::%x:%x%%eth0", i>>16, i&0xffff))
	case 7:
		addr = netip.Addr{} // a session restored without one
	}
	return SessionState{Service: int32(i % len(s.st.Services)), User: fmt.Sprintf("viewer-%07d", i), Addr: addr, Channel: fmt.Sprintf("ch%d", s.rng.IntN(30)),
		Desired: []float64{0, 2500, 5000}[s.rng.IntN(3)], Danmaku: float64(s.rng.IntN(3)), Gift: []float64{0, 0, 90, math.NaN()}[s.rng.IntN(4)],
		Lat: 31.8 + float64(s.rng.IntN(5))/100, Lon: 117.2, Server: int32(s.rng.IntN(len(s.st.Servers)+1)) - 1, Kbps: []float64{1200, 2500, 5000}[s.rng.IntN(3)],
		Seen: s.now.UnixMilli() - s.rng.Int64N(60_000)}
}

// step moves on by d with the given share of sessions changing.
func (s *sim) step(d time.Duration, share float64) {
	s.now = s.now.Add(d)
	st := &AllocState{Instance: s.st.Instance, Made: s.now, Revision: s.st.Revision, Servers: slices.Clone(s.st.Servers), Services: slices.Clone(s.st.Services)}
	for _, ss := range s.st.Sessions {
		if s.rng.Float64() >= share {
			if s.rng.IntN(2) == 0 {
				ss.Seen = s.now.UnixMilli() - s.rng.Int64N(d.Milliseconds()+1)
			}
			st.Sessions = append(st.Sessions, ss)
			continue
		}
		switch s.rng.IntN(5) {
		case 0: // leaves; another arrives
			st.Sessions = append(st.Sessions, s.session())
		case 1: // leaves
		case 2: // changes channel: a new session of the same viewer
			ss.Channel, ss.Seen = fmt.Sprintf("ch%d", s.rng.IntN(30)), s.now.UnixMilli()
			st.Sessions = append(st.Sessions, ss)
		case 3: // moved by the plan
			ss.Server, ss.Kbps = int32(s.rng.IntN(len(st.Servers)+1))-1, []float64{1200, 2500, 5000}[s.rng.IntN(3)]
			st.Sessions = append(st.Sessions, ss)
		default: // arrives
			st.Sessions = append(st.Sessions, ss, s.session())
		}
	}
	s.rng.Shuffle(len(st.Sessions), func(i, j int) { st.Sessions[i], st.Sessions[j] = st.Sessions[j], st.Sessions[i] })
	s.st = st
}

// canonical is st's sessions as they must read back (Seen in its grid,
// floats by their bits), sorted, with the servers and services.
func canonical(st *AllocState) string {
	var lines []string
	for _, s := range st.Sessions {
		seen := s.Seen / SeenGrid
		if s.Seen%SeenGrid < 0 {
			seen--
		}
		f := func(v float64) uint64 { return math.Float64bits(v) }
		lines = append(lines, fmt.Sprintf("%d %q %s %q %x %x %x %x %x %d %x %d", s.Service, s.User, s.Addr, s.Channel, f(s.Desired), f(s.Danmaku), f(s.Gift),
			f(s.Lat), f(s.Lon), s.Server, f(s.Kbps), seen*SeenGrid))
	}
	slices.Sort(lines)
	return fmt.Sprintf("%s %d %d %q %v\n%s", st.Instance, st.Made.UnixNano(), st.Revision, st.Servers, st.Services, strings.Join(lines, "\n"))
}

// readBack decodes m and fails the test unless it is st.
func readBack(t *testing.T, m *MemState, st *AllocState, what string) {
	t.Helper()
	got, err := DecodeState(m.Values())
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if g, w := canonical(got), canonical(st); g != w {
		t.Fatalf("%s: read back\n%.2000s\nwant\n%.2000s", what, g, w)
	}
}

// TestStateFormatRoundTrip: a planner's state published again and again
// as it changes reads back exactly (sessions, Seen in its 10 s steps,
// servers, services and prices), through generations and deltas; small
// changes go out as deltas a fraction of the state's size, and a new
// generation starts before the deltas outgrow the base.
func TestStateFormatRoundTrip(t *testing.T) {
	s := newSim(1, 3000)
	m := NewMemState()
	gens := 0
	var deltaPer, genPer float64 // bytes a session
	for i := range 80 {
		if testing.Short() && i == 6 {
			t.Skip("the race run (-short) races 6 publications (a generation, deltas); make test runs all 80 plain")
		}
		switch i {
		case 20: // a server added, one removed from the plan's list
			s.st.Servers = append(s.st.Servers[1:], "hefei-3-a")
			for k := range s.st.Sessions {
				s.st.Sessions[k].Server = min(s.st.Sessions[k].Server, int32(len(s.st.Servers)-1))
			}
		case 40: // everyone leaves
			s.st.Sessions = nil
		case 41:
			for range 500 {
				s.st.Sessions = append(s.st.Sessions, s.session())
			}
		case 60: // the prices move, a service goes away
			s.st.Services = []ServiceState{{Name: "live", Prices: [][2]float64{{5, 6}}}}
			for k := range s.st.Sessions {
				s.st.Sessions[k].Service = 0
			}
		}
		gen, n, err := m.Publish("hefei", s.st)
		if err != nil {
			t.Fatalf("publication %d: %v", i, err)
		}
		per := float64(n) / float64(max(1, len(s.st.Sessions)))
		if gen {
			gens++
			genPer = max(genPer, per)
		} else if len(s.st.Sessions) > 1000 {
			deltaPer = max(deltaPer, per)
		}
		readBack(t, m, s.st, fmt.Sprintf("publication %d", i))
		s.step(30*time.Second, 0.05)
	}
	if gens < 2 || gens > 20 {
		t.Errorf("%d generations in 80 publications: deltas should carry most, and the base be renewed", gens)
	}
	if deltaPer > genPer/5 {
		t.Errorf("a delta of 5%% changes takes up to %.2f bytes a session, a generation %.2f", deltaPer, genPer)
	}
}

// TestStateFormatForget: a writer that forgot (a failed write) starts a
// generation, which replaces whatever deltas were stored.
func TestStateFormatForget(t *testing.T) {
	s := newSim(2, 200)
	m := NewMemState()
	for i := range 5 {
		if gen, _, err := m.Publish("hefei", s.st); err != nil || gen != (i == 0 || i == 3) {
			t.Fatalf("publication %d: generation %v, %v", i, gen, err)
		}
		readBack(t, m, s.st, fmt.Sprint("publication ", i))
		if i == 2 {
			m.Forget()
		}
		s.step(30*time.Second, 0.02)
	}
}

// TestStateFormatRefusesIncomplete: a head with a part or a delta
// missing, out of order or from elsewhere, or a changed byte, is refused
// with an error saying what is wrong; never a wrong state.
func TestStateFormatRefusesIncomplete(t *testing.T) {
	s := newSim(3, 5000)
	m := NewMemState()
	other := NewMemState()
	for range 4 {
		if _, _, err := m.Publish("hefei", s.st); err != nil {
			t.Fatal(err)
		}
		if _, _, err := other.Publish("hefei", s.st); err != nil {
			t.Fatal(err)
		}
		s.step(30*time.Second, 0.05)
	}
	head, base, deltas := m.Values()
	_, obase, odeltas := other.Values()
	if len(deltas) != 3 {
		t.Fatalf("%d deltas", len(deltas))
	}
	flip := func(v []byte, at int) []byte {
		raw := UnsealState(v)
		raw = slices.Clone(raw)
		raw[at%len(raw)] ^= 0x55
		return SealState(v[3], raw)
	}
	for _, c := range []struct {
		name         string
		head         []byte
		base, deltas [][]byte
		want         string
	}{
		{"a delta missing", head, base, deltas[:2], "2 deltas, the head says 1 and 3"},
		{"deltas swapped", head, base, [][]byte{deltas[1], deltas[0], deltas[2]}, "says it is delta"},
		{"another writer's base", head, obase, deltas, "generation"},
		{"another writer's delta", head, base, [][]byte{deltas[0], odeltas[1], deltas[2]}, "generation"},
		{"a base part missing", head, nil, deltas, "base parts"},
		{"a head for a delta", deltas[0], base, deltas, "kind"},
		{"a delta's byte changed", head, base, [][]byte{deltas[0], flip(deltas[1], 200), deltas[2]}, ""},
		{"a base byte changed", head, [][]byte{flip(base[0], 5000)}, deltas, ""},
		{"gzip", []byte("\x1f\x8b\x08"), base, deltas, "not a plan state value"},
	} {
		_, err := DecodeState(c.head, c.base, c.deltas)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// TestStateFormatRefusesBadInput: what the format cannot carry is refused
// before anything is written, naming the session or the name.
func TestStateFormatRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		name   string
		region string
		mod    func(st *AllocState)
		want   string
	}{
		{"server index", "hefei", func(st *AllocState) { st.Sessions[1].Server = 4 }, "session 1: server 4 of 4"},
		{"server below the fallback", "hefei", func(st *AllocState) { st.Sessions[0].Server = -2 }, "session 0: server -2"},
		{"service index", "hefei", func(st *AllocState) { st.Sessions[2].Service = 2 }, "session 2: service 2 of 2"},
		{"a server twice", "hefei", func(st *AllocState) { st.Servers[3] = st.Servers[0] }, "server 3"},
		{"a service twice", "hefei", func(st *AllocState) { st.Services[1].Name = "live" }, "service 1"},
		{"instance", "hefei", func(st *AllocState) { st.Instance = "a/b" }, "instance"},
		{"region", "he/fei", func(*AllocState) {}, "region"},
		{"a long user", "hefei", func(st *AllocState) { st.Sessions[0].User = strings.Repeat("u", 5000) }, "session 0"},
	} {
		st := newSim(4, 3).st
		c.mod(st)
		if _, _, err := NewMemState().Publish(c.region, st); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// FuzzStateDecode: any values handed to the reader (their payloads, as
// the frame and the compression would only hide them from the fuzzer)
// are decoded or refused, never a panic, within the decoder's bounds.
func FuzzStateDecode(f *testing.F) {
	s := newSim(5, 12)
	m := NewMemState()
	for i := range 4 {
		if _, _, err := m.Publish("hefei", s.st); err != nil {
			f.Fatal(err)
		}
		head, base, deltas := m.Values()
		f.Add(frame(head, base, deltas))
		if i == 0 {
			f.Add(frame(head, base[:0], deltas))
		}
		s.step(30*time.Second, 0.1)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		nb, nd := int(data[0]%4), int(data[1]%8)
		rest := data[2:]
		chunk := func() []byte {
			n, k := binary.Uvarint(rest)
			if k <= 0 || n > uint64(len(rest)-k) {
				c := rest
				rest = nil
				return c
			}
			c := rest[k : k+int(n)]
			rest = rest[k+int(n):]
			return c
		}
		head := chunk()
		var base, deltas [][]byte
		for range nb {
			base = append(base, chunk())
		}
		for range nd {
			deltas = append(deltas, chunk())
		}
		st, err := DecodeRawState(head, base, deltas)
		if err == nil && st == nil {
			t.Fatal("neither a state nor an error")
		}
	})
}

// frame lays stored values out as FuzzStateDecode reads them.
func frame(head []byte, base, deltas [][]byte) []byte {
	out := []byte{byte(len(base)), byte(len(deltas))}
	for _, v := range append(append([][]byte{head}, base...), deltas...) {
		raw := UnsealState(v)
		out = binary.AppendUvarint(out, uint64(len(raw)))
		out = append(out, raw...)
	}
	return out
}

// FuzzStateRoundTrip: whatever sequence of states a planner publishes
// (sessions made from the fuzzer's bytes: duplicates, odd addresses, any
// float) reads back as published after each publication.
func FuzzStateRoundTrip(f *testing.F) {
	f.Add([]byte("\x05\x01\x02\x03\x04\x05\x06\x07\x08\x09\x00\x01\x02\x03\xff\x10\x20\x30"), uint8(3))
	f.Add(make([]byte, 64), uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, rounds uint8) {
		m := NewMemState()
		base := time.Unix(1_800_000_000, 0)
		for r := range int(rounds%8) + 1 {
			st := &AllocState{Instance: "x", Made: base.Add(time.Duration(r) * 7 * time.Second), Servers: []string{"a", "b", "c"},
				Services: []ServiceState{{Name: "live", Prices: [][2]float64{{1, 2}}}, {Name: "v"}}}
			for i := 0; i+4 <= len(data); i += 4 {
				b := data[i : i+4]
				v := b[0] ^ byte(r*int(b[3]&1)) // a share of the sessions change each round
				st.Sessions = append(st.Sessions, SessionState{Service: int32(v % 2), User: fmt.Sprint("u", b[1]%8), Addr: netip.AddrFrom4([4]byte{10, 0, 0, b[2] % 4}),
					Channel: fmt.Sprint(v % 5), Desired: float64(b[3]), Danmaku: math.Float64frombits(uint64(b[2]) << 56), Lat: float64(v % 3), Server: int32(v%4) - 1,
					Kbps: float64(b[1] % 3), Seen: st.Made.UnixMilli() - int64(b[2])*997})
			}
			if _, _, err := m.Publish("r", st); err != nil {
				t.Fatalf("round %d: %v", r, err)
			}
			readBack(t, m, st, fmt.Sprint("round ", r))
		}
	})
}

// TestStateFormatResumes: whichever write of a publication fails, before
// or after it is stored (each of a generation's parts, its head, a delta),
// the stored state reads back as the publication before or this one,
// never anything else; and the next publication resumes: the same
// generation, each part not stored written once, those stored not again,
// and it reads back exactly.
func TestStateFormatResumes(t *testing.T) {
	const partBytes = 4 << 10
	base := newSim(9, 3_000)
	probe := NewMemState()
	probe.SmallParts(partBytes)
	if _, _, err := probe.Publish("hefei", base.st); err != nil {
		t.Fatal(err)
	}
	_, parts, _ := probe.Values()
	if len(parts) < 3 {
		t.Fatalf("%d base parts: the test needs a generation of several", len(parts))
	}
	n := len(parts)
	for _, c := range []struct {
		name    string
		restart bool  // the failing publication is a generation
		writes  []int // which of its writes fail: parts, head; or the delta
	}{
		// The first part, the second, one between, about the last (the
		// next state's generation has a few more parts), the head's.
		{"generation", true, []int{0, 1, n / 2, n - 1, n, n + 1, n + 2, n + 3, n + 4}},
		{"delta", false, []int{0}},
	} {
		if testing.Short() { // the race run: one of each kind
			c.writes = c.writes[len(c.writes)/2:][:1]
		}
		for _, op := range c.writes {
			for _, landed := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/write %d/landed=%v", c.name, op, landed), func(t *testing.T) {
					s := &sim{rng: rand.New(rand.NewPCG(uint64(op), 3)), st: base.st, next: base.next, now: base.now}
					m := NewMemState()
					m.SmallParts(partBytes)
					if _, _, err := m.Publish("hefei", s.st); err != nil {
						t.Fatal(err)
					}
					before := s.st
					s.step(10*time.Second, 0.02)
					if c.restart {
						m.Forget()
					}
					m.FailAt(op, landed)
					_, _, err := m.Publish("hefei", s.st)
					m.FailAt(-1, false)
					if err == nil {
						t.Fatal("the injected failure was not reported")
					}
					tried, stored := m.Attempted(), m.Keys()
					got, err := DecodeState(m.Values())
					if err != nil {
						t.Fatalf("after the failure the stored state does not read: %v", err)
					}
					if g := canonical(got); g != canonical(before) && g != canonical(s.st) {
						t.Fatal("after the failure the stored state is neither the publication before nor the one that failed")
					}
					s.step(10*time.Second, 0.02)
					gen, _, err := m.Publish("hefei", s.st)
					if err != nil {
						t.Fatalf("the publication after the failure: %v", err)
					}
					readBack(t, m, s.st, "the publication after the failure")
					if gen {
						t.Error("the publication after the failure started a generation instead of resuming")
					}
					// Every base part of the generation now stored was
					// either stored before or written now, once.
					var missing []string
					for _, k := range m.Keys() {
						if strings.HasPrefix(k, "b/") && !slices.Contains(stored, k) {
							missing = append(missing, k)
						}
					}
					if got := m.Attempted(); !slices.Equal(got, missing) {
						t.Errorf("resuming wrote the base parts %q; those missing were %q (the failed publication tried %d)", got, missing, len(tried))
					}
				})
			}
		}
	}
}

// FuzzGunzipSized: a topology's parts, as anyone who can write etcd may
// replace them, decompress to exactly the size the signed pointer states
// or fail; never further, never a panic.
func FuzzGunzipSized(f *testing.F) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"regions":[]}`))
	zw.Close()
	f.Add(gz.Bytes(), 14)
	f.Add(gz.Bytes(), 3)
	f.Add([]byte("not gzip"), 10)
	f.Fuzz(func(t *testing.T, b []byte, size int) {
		if size < 0 || size > 1<<20 {
			return
		}
		data, err := GunzipSized(b, size)
		if err == nil && len(data) != size {
			t.Fatalf("%d bytes decompressed without an error, the pointer states %d", len(data), size)
		}
	})
}
