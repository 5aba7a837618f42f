package balance

// Hashes here are fixed functions with no per-process seed (unlike
// hash/maphash): every scheduler, and every rebuild of a table, must send one
// channel to the same server and one STB to the same server, so the hash of a
// key is part of the wire contract between schedulers. Changing any of these
// functions remaps every key once.

const golden = 0x9E3779B97F4A7C15 // 2^64 / phi, the usual odd multiplier

// Mix is the murmur3 / splitmix64 finaliser, shared with steer's client hash.
func Mix(x uint64) uint64 { return mix(x) }

// mix is the murmur3 / splitmix64 finaliser: a bijection on uint64 whose
// output bits each depend on every input bit. It turns weak hashes (sequential
// replica numbers, FNV of short strings) into well-spread ring positions.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// hasher is an incremental, allocation-free string hash: 8 bytes at a time
// into a multiply-xor state, finished by mix. ContentHash feeds it the pieces
// of a content key so that the key string never has to be built.
type hasher struct {
	h   uint64
	buf uint64 // pending bytes, little-endian
	n   uint   // pending byte count, 0..7
	len uint64 // total bytes, so "ab"+"" and "a"+"b" agree but "a" and "a\x00" differ
}

func newHasher() hasher { return hasher{h: 0xcbf29ce484222325} }

func (s *hasher) writeString(p string) {
	s.len += uint64(len(p))
	i := 0
	// Top up the pending word first.
	for s.n != 0 && i < len(p) {
		s.buf |= uint64(p[i]) << (8 * s.n)
		s.n++
		i++
		if s.n == 8 {
			s.round(s.buf)
			s.buf, s.n = 0, 0
		}
	}
	for ; i+8 <= len(p); i += 8 {
		s.round(uint64(p[i]) | uint64(p[i+1])<<8 | uint64(p[i+2])<<16 | uint64(p[i+3])<<24 |
			uint64(p[i+4])<<32 | uint64(p[i+5])<<40 | uint64(p[i+6])<<48 | uint64(p[i+7])<<56)
	}
	for ; i < len(p); i++ {
		s.buf |= uint64(p[i]) << (8 * s.n)
		s.n++
	}
}

func (s *hasher) writeByte(b byte) {
	s.len++
	s.buf |= uint64(b) << (8 * s.n)
	s.n++
	if s.n == 8 {
		s.round(s.buf)
		s.buf, s.n = 0, 0
	}
}

func (s *hasher) round(w uint64) {
	s.h = (s.h ^ w) * 0x100000001b3
	s.h ^= s.h >> 29
	s.h *= golden
}

func (s *hasher) sum() uint64 {
	h := s.h
	if s.n != 0 {
		h = (h ^ s.buf) * 0x100000001b3
	}
	return mix(h ^ s.len*golden)
}

// HashKey is the content-key hash the policies take as keyHash: ContentHash of
// a request equals HashKey of its ContentKey. DNS answers, which have no path,
// pass HashKey of the queried name (or 0 when the policy ignores keys).
func HashKey(key string) uint64 {
	s := newHasher()
	s.writeString(key)
	return s.sum()
}

// serverID is a server's stable identity for hashing: its name when it has
// one, so that a server keeps its ring points and its rendezvous scores when
// the topology's indices shift around it; its index otherwise.
func serverID(s *Server) uint64 {
	if s.Name != "" {
		return HashKey(s.Name)
	}
	return mix(uint64(s.Index) + 1)
}
