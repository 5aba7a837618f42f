package store

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
)

// The plan state's binary format (docs/design.md, "Plan state in etcd").
//
// A planner's state is a table of slots, each holding one session. What
// is stored is a generation: a base (every live slot, numbered densely,
// in parts of at most stateValueBytes) and the chain of deltas published
// since (each the changes from the previous publication: slots emptied,
// slots set or changed field by field, slots seen again), plus a head
// naming the generation, how many deltas it has, the sessions' count and
// checksum, and what is not per session (the servers, the services and
// their prices). The writer starts a new generation when the deltas since
// the base add up to more than the base (so what is live stays under
// twice the state), after stateMaxDeltas of them, and whenever it has no
// memory of what it wrote (a restart, a failed write).
//
// A session's fields are held as indices into tables of the generation
// (strings: services, servers, channels; locations; profiles; bitrates)
// that deltas extend, so that a session costs a few bytes beyond its
// viewer and address, and a change of channel or server a few bytes. Seen
// is kept in stateSeenGrid steps (rounded down): only a request in
// another step changes it.
//
// Every value starts with stateMagic and its kind, then a DEFLATE stream.
// The decoder bounds every count and size by what is left of its input
// and by the limits below, and never panics.

const (
	stateMagic = "AS2" // then the kind: 'h', 'b' or 'd'

	kindHead  = 'h'
	kindBase  = 'b'
	kindDelta = 'd'

	// stateValueBytes bounds a stored value (compressed), well below
	// etcd's 1.5 MiB request limit.
	stateValueBytes = 1 << 20
	// stateMaxRaw bounds a value once decompressed.
	stateMaxRaw = 64 << 20
	// stateMaxSlots bounds a state's slots (alloc.max_sessions is 10^6).
	stateMaxSlots = 1 << 24
	// stateMaxParts, stateMaxDeltas: what the reader accepts of a
	// generation; the writer starts a new one after stateWriterDeltas.
	stateMaxParts  = 4096
	stateMaxDeltas = 4096
	// stateMaxString bounds every string (a token's subject is at most
	// 256 bytes; names are shorter).
	stateMaxString = 4096
	// stateSeenGrid is the step Seen is kept in, in milliseconds.
	stateSeenGrid = 10_000
)

// Field bits of a set slot in a delta; a full set names every one.
const (
	fService uint8 = 1 << iota
	fUser
	fAddr
	fChannel
	fProfile
	fLocation
	fServer
	fKbps
	fAll = fService | fUser | fAddr | fChannel | fProfile | fLocation | fServer | fKbps
)

// slot is one session as the format holds it: its fields as indices into
// the generation's tables, Seen as a grid step.
type slot struct {
	live                     bool
	user                     string
	addr                     netip.Addr
	service, channel, server int32 // strs; server -1: the fallback
	profile, location, kbps  int32 // profiles, locations, nums
	seen                     int64 // unix milliseconds / stateSeenGrid
}

func sameKey(a, b *slot) bool {
	return a.service == b.service && a.user == b.user && a.addr == b.addr && a.channel == b.channel
}

func sameViewer(a, b *slot) bool {
	return a.service == b.service && a.user == b.user && a.addr == b.addr
}

// changed is the mask of b's fields that differ from a's.
func changed(a, b *slot) uint8 {
	var m uint8
	if a.service != b.service {
		m |= fService
	}
	if a.user != b.user {
		m |= fUser
	}
	if a.addr != b.addr {
		m |= fAddr
	}
	if a.channel != b.channel {
		m |= fChannel
	}
	if a.profile != b.profile {
		m |= fProfile
	}
	if a.location != b.location {
		m |= fLocation
	}
	if a.server != b.server {
		m |= fServer
	}
	if a.kbps != b.kbps {
		m |= fKbps
	}
	return m
}

// tables are a generation's tables. The writer keeps reverse indices
// (index*), the reader only the slices.
type tables struct {
	strs      []string
	locations [][2]float64 // lat, lon
	profiles  [][3]float64 // desired kbps, danmaku, gift
	nums      []float64    // bitrates

	strIndex      map[string]int32
	locationIndex map[[2]uint64]int32
	profileIndex  map[[3]uint64]int32
	numIndex      map[uint64]int32
}

func newTables() *tables {
	return &tables{strIndex: map[string]int32{}, locationIndex: map[[2]uint64]int32{}, profileIndex: map[[3]uint64]int32{}, numIndex: map[uint64]int32{}}
}

// lens are the tables' lengths: what a delta's additions start from.
type lens struct{ strs, locations, profiles, nums int }

func (t *tables) lens() lens {
	return lens{len(t.strs), len(t.locations), len(t.profiles), len(t.nums)}
}

func (t *tables) str(s string) int32 {
	i, ok := t.strIndex[s]
	if !ok {
		i = int32(len(t.strs))
		t.strs = append(t.strs, s)
		t.strIndex[s] = i
	}
	return i
}

// Floats are interned by their bits, so that each value (NaN included)
// comes back exactly.
func (t *tables) location(lat, lon float64) int32 {
	k := [2]uint64{math.Float64bits(lat), math.Float64bits(lon)}
	i, ok := t.locationIndex[k]
	if !ok {
		i = int32(len(t.locations))
		t.locations = append(t.locations, [2]float64{lat, lon})
		t.locationIndex[k] = i
	}
	return i
}

func (t *tables) profile(desired, danmaku, gift float64) int32 {
	k := [3]uint64{math.Float64bits(desired), math.Float64bits(danmaku), math.Float64bits(gift)}
	i, ok := t.profileIndex[k]
	if !ok {
		i = int32(len(t.profiles))
		t.profiles = append(t.profiles, [3]float64{desired, danmaku, gift})
		t.profileIndex[k] = i
	}
	return i
}

func (t *tables) num(v float64) int32 {
	k := math.Float64bits(v)
	i, ok := t.numIndex[k]
	if !ok {
		i = int32(len(t.nums))
		t.nums = append(t.nums, v)
		t.numIndex[k] = i
	}
	return i
}

// appendTables writes the tables' entries from l on.
func (t *tables) appendTables(b []byte, l lens) []byte {
	b = binary.AppendUvarint(b, uint64(len(t.strs)-l.strs))
	for _, s := range t.strs[l.strs:] {
		b = appendString(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(t.locations)-l.locations))
	for _, v := range t.locations[l.locations:] {
		b = appendFloats(b, v[:]...)
	}
	b = binary.AppendUvarint(b, uint64(len(t.profiles)-l.profiles))
	for _, v := range t.profiles[l.profiles:] {
		b = appendFloats(b, v[:]...)
	}
	b = binary.AppendUvarint(b, uint64(len(t.nums)-l.nums))
	return appendFloats(b, t.nums[l.nums:]...)
}

// readTables appends a value's table entries to t (the reader's: no
// indices).
func (t *tables) readTables(d *decoder) {
	n := d.count(1)
	for range n {
		t.strs = append(t.strs, d.string())
	}
	n = d.count(16)
	for range n {
		t.locations = append(t.locations, [2]float64{d.float(), d.float()})
	}
	n = d.count(24)
	for range n {
		t.profiles = append(t.profiles, [3]float64{d.float(), d.float(), d.float()})
	}
	n = d.count(8)
	for range n {
		t.nums = append(t.nums, d.float())
	}
	if len(t.strs) > stateMaxSlots || len(t.locations) > stateMaxSlots || len(t.profiles) > stateMaxSlots || len(t.nums) > stateMaxSlots {
		d.fail("tables over %d entries", stateMaxSlots)
	}
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendFloats(b []byte, vs ...float64) []byte {
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

// appendFields writes the fields of s named in mask, in the bits' order.
func appendFields(b []byte, s *slot, mask uint8) []byte {
	if mask&fService != 0 {
		b = binary.AppendUvarint(b, uint64(s.service))
	}
	if mask&fUser != 0 {
		b = appendString(b, s.user)
	}
	if mask&fAddr != 0 {
		a, _ := s.addr.MarshalBinary() // never fails
		b = appendString(b, string(a))
	}
	if mask&fChannel != 0 {
		b = binary.AppendUvarint(b, uint64(s.channel))
	}
	if mask&fProfile != 0 {
		b = binary.AppendUvarint(b, uint64(s.profile))
	}
	if mask&fLocation != 0 {
		b = binary.AppendUvarint(b, uint64(s.location))
	}
	if mask&fServer != 0 {
		b = binary.AppendUvarint(b, uint64(s.server+1))
	}
	if mask&fKbps != 0 {
		b = binary.AppendUvarint(b, uint64(s.kbps))
	}
	return b
}

// readFields reads the fields named in mask into s, each index checked
// against t.
func readFields(d *decoder, t *tables, s *slot, mask uint8) {
	idx := func(n int, what string) int32 {
		v := d.uvarint()
		if v >= uint64(n) {
			d.fail("%s %d of %d", what, v, n)
			return 0
		}
		return int32(v)
	}
	if mask&fService != 0 {
		s.service = idx(len(t.strs), "service string")
	}
	if mask&fUser != 0 {
		s.user = d.string()
	}
	if mask&fAddr != 0 {
		raw := d.string()
		if err := s.addr.UnmarshalBinary([]byte(raw)); err != nil {
			d.fail("address: %v", err)
		}
	}
	if mask&fChannel != 0 {
		s.channel = idx(len(t.strs), "channel string")
	}
	if mask&fProfile != 0 {
		s.profile = idx(len(t.profiles), "profile")
	}
	if mask&fLocation != 0 {
		s.location = idx(len(t.locations), "location")
	}
	if mask&fServer != 0 {
		s.server = idx(len(t.strs)+1, "server string") - 1
	}
	if mask&fKbps != 0 {
		s.kbps = idx(len(t.nums), "bitrate")
	}
}

// checksum of one live slot, over what it means (the tables' values, not
// their indices), so that the reader's reconstruction is checked against
// the writer's state; the state's is the sum over its slots (a multiset
// hash: the order of the slots does not matter).
func (t *tables) checksum(s *slot, buf []byte) (uint64, []byte) {
	buf = buf[:0]
	buf = appendString(buf, t.strs[s.service])
	buf = appendString(buf, s.user)
	a, _ := s.addr.MarshalBinary()
	buf = appendString(buf, string(a))
	buf = appendString(buf, t.strs[s.channel])
	buf = appendFloats(buf, t.profiles[s.profile][:]...)
	buf = appendFloats(buf, t.locations[s.location][:]...)
	if s.server >= 0 {
		buf = appendString(buf, t.strs[s.server])
	} else {
		buf = append(buf, 0xff)
	}
	buf = appendFloats(buf, t.nums[s.kbps])
	buf = binary.AppendVarint(buf, s.seen)
	// FNV-1a, 64 bits: stable across processes and builds.
	h := uint64(14695981039346656037)
	for _, c := range buf {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h, buf
}

// head is what a publication says of the state beside its sessions.
type head struct {
	instance  string
	gen       uint64
	seq       int // deltas since the base
	made      int64
	revision  int64
	sessions  int
	slots     int // the slot table's length
	checksum  uint64
	baseParts int
	servers   []string
	services  []ServiceState
}

func (h *head) encode() []byte {
	b := appendString(nil, h.instance)
	b = binary.LittleEndian.AppendUint64(b, h.gen)
	b = binary.AppendUvarint(b, uint64(h.seq))
	b = binary.AppendVarint(b, h.made)
	b = binary.AppendVarint(b, h.revision)
	b = binary.AppendUvarint(b, uint64(h.sessions))
	b = binary.AppendUvarint(b, uint64(h.slots))
	b = binary.LittleEndian.AppendUint64(b, h.checksum)
	b = binary.AppendUvarint(b, uint64(h.baseParts))
	b = binary.AppendUvarint(b, stateSeenGrid)
	b = binary.AppendUvarint(b, uint64(len(h.servers)))
	for _, s := range h.servers {
		b = appendString(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(h.services)))
	for _, sv := range h.services {
		b = appendString(b, sv.Name)
		if sv.Prices == nil {
			b = binary.AppendUvarint(b, 0)
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(sv.Prices))+1)
		for _, p := range sv.Prices {
			b = appendFloats(b, p[0], p[1])
		}
	}
	return seal(kindHead, b)
}

func decodeHead(val []byte) (*head, error) {
	d, err := open(val, kindHead)
	if err != nil {
		return nil, err
	}
	return d.head()
}

// head reads a head's payload.
func (d *decoder) head() (*head, error) {
	h := &head{instance: d.string(), gen: d.fixed64()}
	h.seq = d.int(stateMaxDeltas, "deltas")
	h.made, h.revision = d.varint(), d.varint()
	h.sessions = d.int(stateMaxSlots, "sessions")
	h.slots = d.int(stateMaxSlots, "slots")
	h.checksum = d.fixed64()
	h.baseParts = d.int(stateMaxParts, "base parts")
	if g := d.uvarint(); d.err == nil && g != stateSeenGrid {
		d.fail("seen kept in steps of %d ms, this build reads %d", g, stateSeenGrid)
	}
	n := d.count(1)
	for range n {
		h.servers = append(h.servers, d.string())
	}
	n = d.count(1)
	for range n {
		sv := ServiceState{Name: d.string()}
		// the prices' count plus one: 0 is none at all
		if p := d.uvarint(); p > 0 {
			if p-1 > uint64(len(d.b)/16) {
				d.fail("%d prices in %d bytes", p-1, len(d.b))
				break
			}
			sv.Prices = make([][2]float64, 0, p-1)
			for range p - 1 {
				sv.Prices = append(sv.Prices, [2]float64{d.float(), d.float()})
			}
		}
		h.services = append(h.services, sv)
	}
	if d.err == nil && (h.baseParts < 1 || h.sessions > h.slots) {
		d.fail("%d base parts, %d sessions in %d slots", h.baseParts, h.sessions, h.slots)
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return h, nil
}

// seal frames a value: the magic, its kind, the payload compressed.
func seal(kind byte, payload []byte) []byte {
	var b bytes.Buffer
	b.WriteString(stateMagic)
	b.WriteByte(kind)
	zw, _ := flate.NewWriter(&b, flate.DefaultCompression) // a valid level: never fails
	_, _ = zw.Write(payload)                               // into memory: never fails
	_ = zw.Close()
	return b.Bytes()
}

// isBinaryState reports whether val is a value of this format (rather
// than a part of the gzipped JSON one it replaced).
func isBinaryState(val []byte) bool {
	return len(val) > len(stateMagic) && string(val[:len(stateMagic)]) == stateMagic
}

// newerState is the refusal of val if it is a plan state value of a
// later format than this build's: its magic is stateMagic's letters and a
// higher digit.
func newerState(val []byte) error {
	n := len(stateMagic) - 1
	if len(val) <= n || string(val[:n]) != stateMagic[:n] || val[n] < '0' || val[n] > '9' {
		return nil
	}
	if f := int(val[n] - '0'); f > StateFormat {
		return &NewerFormatError{Document: "plan state", Format: f, Reads: StateFormat}
	}
	return nil
}

// open checks a value's frame and decompresses it, at most stateMaxRaw.
func open(val []byte, kind byte) (*decoder, error) {
	if !isBinaryState(val) {
		if err := newerState(val); err != nil {
			return nil, err
		}
		return nil, errors.New("not a plan state value of this format")
	}
	if k := val[len(stateMagic)]; k != kind {
		return nil, fmt.Errorf("a value of kind %q where %q belongs", k, kind)
	}
	zr := flate.NewReader(bytes.NewReader(val[len(stateMagic)+1:]))
	raw, err := io.ReadAll(io.LimitReader(zr, stateMaxRaw+1))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	if len(raw) > stateMaxRaw {
		return nil, fmt.Errorf("over %d bytes decompressed", stateMaxRaw)
	}
	return &decoder{b: raw}, nil
}

// decoder reads a payload; the first problem sticks (err) and every later
// read returns zero values, so that a caller checks once.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("truncated or overlong number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint reads binary.AppendVarint's zigzag encoding.
func (d *decoder) varint() int64 {
	u := d.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (d *decoder) fixed64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) float() float64 { return math.Float64frombits(d.fixed64()) }

// int reads a number of at most limit.
func (d *decoder) int(limit int, what string) int {
	v := d.uvarint()
	if v > uint64(limit) {
		d.fail("%d %s, over %d", v, what, limit)
		return 0
	}
	return int(v)
}

// count reads how many items follow, each of at least min bytes: no more
// than what is left can hold.
func (d *decoder) count(min int) int {
	v := d.uvarint()
	if d.err == nil && v > uint64(len(d.b)/min) {
		d.fail("%d items in %d bytes", v, len(d.b))
		return 0
	}
	return int(v)
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > stateMaxString || n > uint64(len(d.b)) {
		d.fail("a string of %d bytes (%d left, at most %d)", n, len(d.b), stateMaxString)
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) byte() uint8 {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// done reports the first problem, or bytes left over.
func (d *decoder) done() error {
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d bytes left over", len(d.b))
	}
	return d.err
}
