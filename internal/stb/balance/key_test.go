package balance

import (
	"fmt"
	"testing"
)

func TestContentKey(t *testing.T) {
	q := KeyOptions{Query: []string{"rendition", "prog"}}
	for _, tc := range []struct {
		path, query string
		o           KeyOptions
		want        string
	}{
		{"/cctv1/index.m3u8", "", KeyOptions{}, "cctv1"},
		{"/cctv1/2000/seg-1.ts", "token=abc", KeyOptions{}, "cctv1"},
		{"cctv1", "", KeyOptions{}, "cctv1"},
		{"/", "", KeyOptions{}, ""},
		{"/vod/movie/1.mp4", "token=x", KeyOptions{By: KeyPath}, "vod/movie/1.mp4"},
		{"/cctv1/index.m3u8", "token=abc&rendition=hd", q, "cctv1?rendition=hd"},
		{"/cctv1/index.m3u8", "prog=7&x=1&rendition=hd", q, "cctv1?rendition=hd&prog=7"}, // whitelist order
		{"/cctv1/index.m3u8", "rendition=hd&rendition=sd", q, "cctv1?rendition=hd"},      // first occurrence
		{"/cctv1/index.m3u8", "prog&rendition=", q, "cctv1?rendition=&prog"},
		{"/cctv1/index.m3u8", "token=abc", q, "cctv1"},
		{"/cctv1/index.m3u8", "renditionx=hd", q, "cctv1"},
	} {
		got := ContentKey(tc.path, tc.query, tc.o)
		if got != tc.want {
			t.Errorf("ContentKey(%q, %q): %q, want %q", tc.path, tc.query, got, tc.want)
		}
		if h, want := ContentHash(tc.path, tc.query, tc.o), HashKey(got); h != want {
			t.Errorf("ContentHash(%q, %q) = %x, HashKey(%q) = %x", tc.path, tc.query, h, got, want)
		}
	}
}

func TestContentKeyAllocations(t *testing.T) {
	q := KeyOptions{Query: []string{"rendition"}}
	if n := testing.AllocsPerRun(100, func() { _ = ContentKey("/cctv1/index.m3u8", "token=abc&rendition=hd", KeyOptions{}) }); n != 0 {
		t.Errorf("ContentKey without whitelist: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = ContentKey("/cctv1/index.m3u8", "token=abc", q) }); n != 0 {
		t.Errorf("ContentKey with no whitelisted parameter present: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = ContentHash("/cctv1/index.m3u8", "token=abc&rendition=hd", q) }); n != 0 {
		t.Errorf("ContentHash: %v allocations", n)
	}
}

// TestHasherChunking: feeding a string in any split gives the hash of the
// whole, and distinct strings (including ones differing only in length or
// trailing zero bytes) hash apart.
func TestHasherChunking(t *testing.T) {
	const s = "the quick brown fox jumps over the lazy dog, 0123456789"
	want := HashKey(s)
	for i := 0; i <= len(s); i++ {
		for j := i; j <= len(s); j++ {
			h := newHasher()
			h.writeString(s[:i])
			for k := i; k < j; k++ {
				h.writeByte(s[k])
			}
			h.writeString(s[j:])
			if h.sum() != want {
				t.Fatalf("split %d/%d: %x, want %x", i, j, h.sum(), want)
			}
		}
	}
	seen := map[uint64]string{}
	for _, k := range []string{"", "\x00", "\x00\x00", "a", "a\x00", "ab", "ba", "abcdefgh", "abcdefgh\x00"} {
		h := HashKey(k)
		if o, dup := seen[h]; dup {
			t.Errorf("%q and %q collide", k, o)
		}
		seen[h] = k
	}
	for i := range 100_000 {
		k := fmt.Sprint(i)
		if o, dup := seen[HashKey(k)]; dup {
			t.Fatalf("%q and %q collide", k, o)
		}
		seen[HashKey(k)] = k
	}
}

// TestContentKeyOf: a channel found elsewhere joins the same parameters as
// ContentKey would, and hashes as its key, without allocating.
func TestContentKeyOf(t *testing.T) {
	q := []string{"bitrate", "channel"}
	for _, tc := range []struct{ base, query, want string }{
		{"3221225618", "token=t", "3221225618"},
		{"CCTV1", "channel=CCTV1&bitrate=2000&x=1", "CCTV1?bitrate=2000&channel=CCTV1"},
		{"", "bitrate", "?bitrate"},
		{"vod/a.mp4", "", "vod/a.mp4"},
	} {
		got := ContentKeyOf(tc.base, tc.query, q)
		if got != tc.want {
			t.Errorf("ContentKeyOf(%q, %q) = %q, want %q", tc.base, tc.query, got, tc.want)
		}
		if h, want := ContentHashOf(tc.base, tc.query, q), HashKey(got); h != want {
			t.Errorf("ContentHashOf(%q, %q) = %x, HashKey(%q) = %x", tc.base, tc.query, h, got, want)
		}
	}
	if got, want := ContentKey("/cctv1/i.m3u8", "rendition=hd", KeyOptions{Query: []string{"rendition"}}), ContentKeyOf("cctv1", "rendition=hd", []string{"rendition"}); got != want {
		t.Errorf("ContentKey %q, ContentKeyOf %q", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { _ = ContentHashOf("CCTV1", "channel=CCTV1&bitrate=2000", q) }); n != 0 {
		t.Errorf("ContentHashOf: %v allocations", n)
	}
}
