package balance

import "slices"

// radixSort sorts keys ascending: LSD radix sort with 11-bit digits (six
// passes cover 64 bits), several times faster than a comparison sort for
// the ring of a large node (160 points x 1,024 servers), whose build time is
// what a topology change waits for. Small inputs use slices.Sort.
func radixSort(keys []uint64) {
	if len(keys) < 4096 {
		slices.Sort(keys)
		return
	}
	const bits, buckets = 11, 1 << 11
	tmp := make([]uint64, len(keys))
	src, dst := keys, tmp
	var count [buckets]int
	for shift := uint(0); shift < 64; shift += bits {
		clear(count[:])
		for _, k := range src {
			count[(k>>shift)&(buckets-1)]++
		}
		sum := 0
		for i, c := range count {
			count[i] = sum
			sum += c
		}
		for _, k := range src {
			d := (k >> shift) & (buckets - 1)
			dst[count[d]] = k
			count[d]++
		}
		src, dst = dst, src
	}
	// Six passes: the sorted data ended in keys (even count of swaps).
}
