package outlier

import "sync/atomic"

// A slot of the re-ask table is one atomic word remembering the last answer
// for the (client, content) pairs hashing to it:
//
//	bits 63..52  tag     12 high bits of the pair's hash (told apart from
//	                     others sharing the slot; with the 16 index bits
//	                     of the default table, 28 bits of hash must match
//	                     for a false re-ask)
//	bit  51      gen     parity of the server table the index refers to
//	bits 50..37  seq     low 14 bits of the request's number at its server
//	bits 36..21  server  server index + 1 (0: empty slot)
//	bits 20..0   time    unix nanoseconds >> 20 (1.05 ms), wrapping every 36 min
//
// seq orders a server's requests, which is what lets the consecutive rule
// ask Envoy's question (were N requests in a row failed?) rather than a
// cruder one; gen lets a failure found after SetServers re-indexed the
// servers be attributed through the previous table's numbering.
const (
	timeBits   = 21
	serverBits = 16
	seqBits    = 14
	tagBits    = 12

	serverShift = timeBits
	seqShift    = serverShift + serverBits
	genShift    = seqShift + seqBits
	tagShift    = genShift + 1

	timeMask   = 1<<timeBits - 1
	serverMask = 1<<serverBits - 1
	seqMask    = 1<<seqBits - 1

	// timeUnitShift converts unix nanoseconds to slot time units.
	timeUnitShift = 20
	timeUnit      = 1 << timeUnitShift // ns

	// maxServers is how many servers a slot can name (index+1 must fit).
	maxServers = serverMask

	// ringSize is how many recent failures of a server the consecutive
	// rule looks at (a power of two).
	ringSize = 64
)

// mix hashes a (client, content) pair. The content key is multiplied
// before the xor so that (a, b) and (b, a) differ; the rest is the
// finalizer of splitmix64, so that index and tag bits are independent.
func mix(client, content uint64) uint64 {
	h := client ^ (content * 0x9E3779B97F4A7C15)
	h ^= h >> 30
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 27
	h *= 0x94D049BB133111EB
	h ^= h >> 31
	return h
}

// pack builds a slot word; tag is the pair's hash (its high bits are kept).
func pack(hash, gen, seq uint64, server int32, t uint64) uint64 {
	return hash>>tagShift<<tagShift |
		(gen&1)<<genShift |
		(seq&seqMask)<<seqShift |
		uint64(server+1)<<serverShift |
		t&timeMask
}

// counters are one server's lock-free tallies, shared by every server
// table that names the server, so re-indexing loses no counts. requests
// sits alone on its cache line: it is written on every answer, the rest
// only on failures and reports.
type counters struct {
	requests atomic.Uint64 // answers sent to the server; also their sequence numbers
	_        [120]byte
	failures atomic.Uint64 // re-asks attributed to the server
	edgeReq  atomic.Uint64 // requests the edge reported
	edgeErr  atomic.Uint64 // errors the edge reported
	failN    atomic.Uint64 // failures written to recent
	_        [96]byte
	// recent holds the sequence numbers of the last ringSize failed
	// requests, for the consecutive rule.
	recent [ringSize]atomic.Uint64
}

// table is what Observe needs of one SetServers call; it is immutable once
// published.
type table struct {
	servers []*counters
	gen     uint64
	// remap maps the previous table's indexes to this one's (-1: gone).
	remap []int32
}
