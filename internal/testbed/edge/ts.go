package edge

import (
	"bytes"
	_ "embed"
	"fmt"
	"time"
)

// gop is one second of H.264 (Annex B, 160x90, 10 frames, one IDR GOP with
// SPS/PPS and access unit delimiters, no B-frames), made once with
//
//	ffmpeg -f lavfi -i testsrc2=size=160x90:rate=10 -frames:v 10 \
//	  -c:v libx264 -preset veryfast -profile:v baseline -pix_fmt yuv420p \
//	  -g 10 -keyint_min 10 -sc_threshold 0 -bf 0 \
//	  -x264-params aud=1:repeat-headers=1 -b:v 64k \
//	  -bsf:v h264_mp4toannexb,filter_units=remove_types=6 -f h264 gop.h264
//
// Every segment carries it again with its own timestamps, so a player
// decodes an endless, seamless stream without ffmpeg at run time.
//
//go:embed testdata/gop.h264
var gop []byte

// SegmentDuration is the media time of every segment.
const SegmentDuration = time.Second

// SegmentBytes is the size of every segment: whole 188-byte TS packets, the
// media padded with null packets, so a segment weighs what a real one at
// about 260 kbps would.
const SegmentBytes = 174 * tsPacket

// MPEG-TS layout of the segments.
const (
	tsPacket  = 188
	pidPMT    = 0x1000
	pidVideo  = 0x100
	pidNull   = 0x1fff
	clock     = 90000 // PTS ticks per second
	ptsOffset = clock // the first segment's PTS: PCR (below it) stays positive
	pcrLead   = clock / 5
)

// frames splits the embedded GOP into access units (each begins with an
// access unit delimiter, NAL type 9).
func frames() [][]byte {
	var out [][]byte
	aud := []byte{0, 0, 0, 1, 9}
	rest := gop
	for len(rest) > 0 {
		next := bytes.Index(rest[len(aud):], aud)
		if next < 0 {
			out = append(out, rest)
			break
		}
		out = append(out, rest[:len(aud)+next])
		rest = rest[len(aud)+next:]
	}
	return out
}

// Muxer makes segments: the embedded GOP in MPEG-TS (PAT, PMT, one H.264
// PES per frame, PCR on the video PID), timestamps and continuity counters
// following from the segment's sequence number, so consecutive segments
// (from any edge) join without a discontinuity.
type Muxer struct {
	frames  [][]byte
	packets int // video TS packets per segment: the continuity counter advances this much
}

// NewMuxer prepares the segments' media.
func NewMuxer() *Muxer {
	m := &Muxer{frames: frames()}
	m.packets = len(m.media(0))/tsPacket - 2 // less PAT and PMT
	if len(m.media(0)) > SegmentBytes {
		panic(fmt.Sprintf("edge: a segment's media is %d bytes, more than SegmentBytes", len(m.media(0))))
	}
	return m
}

// segTicks is a segment's duration in PTS ticks.
const segTicks = clock * int64(SegmentDuration/time.Millisecond) / 1000

// Segment returns segment seq, SegmentBytes long. Its first PTS is
// ptsOffset + seq*SegmentDuration (modulo 2^33, as the field is).
func (m *Muxer) Segment(seq int64) []byte {
	b := m.media(seq)
	for len(b) < SegmentBytes {
		b = append(b, 0x47, pidNull>>8, pidNull&0xff, 0x10)
		b = append(b, bytes.Repeat([]byte{0xff}, tsPacket-4)...)
	}
	return b
}

// media is segment seq before its padding.
func (m *Muxer) media(seq int64) []byte {
	b := make([]byte, 0, SegmentBytes)
	cc := byte(seq) // PAT and PMT: one packet each per segment
	b = appendPSI(b, 0, cc, pat())
	b = appendPSI(b, pidPMT, cc, pmt())
	vcc := byte(seq * int64(m.packets))
	perFrame := segTicks / int64(len(m.frames))
	for k, f := range m.frames {
		pts := (ptsOffset + seq*segTicks + int64(k)*perFrame) & (1<<33 - 1)
		b, vcc = appendPES(b, vcc, pts, k == 0, f)
	}
	return b
}

// pat lists one program, its PMT on pidPMT.
func pat() []byte {
	return section(0x00, 1, []byte{0x00, 0x01, 0xe0 | pidPMT>>8, pidPMT & 0xff})
}

// pmt: program 1, PCR and one H.264 stream (type 0x1b) on pidVideo.
func pmt() []byte {
	return section(0x02, 1, []byte{
		0xe0 | pidVideo>>8, pidVideo & 0xff, 0xf0, 0x00, // PCR PID, no program info
		0x1b, 0xe0 | pidVideo>>8, pidVideo & 0xff, 0xf0, 0x00,
	})
}

// section wraps a PSI table body (version 0, current, one section) with its
// header and CRC.
func section(table byte, id uint16, body []byte) []byte {
	n := 5 + len(body) + 4 // after the length field: id..last_section, body, CRC
	s := []byte{table, 0xb0 | byte(n>>8), byte(n), byte(id >> 8), byte(id), 0xc1, 0x00, 0x00}
	s = append(s, body...)
	c := crc32MPEG(s)
	return append(s, byte(c>>24), byte(c>>16), byte(c>>8), byte(c))
}

// crc32MPEG is the CRC of PSI sections (CRC-32/MPEG-2: not reflected, no
// final xor, which hash/crc32 does not offer).
func crc32MPEG(b []byte) uint32 {
	c := uint32(0xffffffff)
	for _, x := range b {
		c ^= uint32(x) << 24
		for range 8 {
			if c&0x80000000 != 0 {
				c = c<<1 ^ 0x04c11db7
			} else {
				c <<= 1
			}
		}
	}
	return c
}

// appendPSI appends one TS packet carrying a section (pointer field 0,
// stuffed with 0xff).
func appendPSI(b []byte, pid uint16, cc byte, sec []byte) []byte {
	p := []byte{0x47, 0x40 | byte(pid>>8), byte(pid), 0x10 | cc&0x0f, 0x00}
	p = append(p, sec...)
	for len(p) < tsPacket {
		p = append(p, 0xff)
	}
	return append(b, p...)
}

// appendPES appends one frame as a PES packet (PTS only: no B-frames, so
// DTS equals it) over TS packets; the first carries the PCR (and the random
// access flag for the IDR frame), the last is stuffed through its
// adaptation field. It returns the next continuity counter.
func appendPES(b []byte, cc byte, pts int64, idr bool, frame []byte) ([]byte, byte) {
	pes := []byte{0, 0, 1, 0xe0, 0, 0, 0x84, 0x80, 5,
		0x21 | byte(pts>>29)&0x0e, byte(pts >> 22), 0x01 | byte(pts>>14)&0xfe, byte(pts >> 7), 0x01 | byte(pts<<1)&0xfe}
	if n := len(pes) - 6 + len(frame); n <= 0xffff {
		pes[4], pes[5] = byte(n>>8), byte(n)
	}
	pes = append(pes, frame...)
	first := true
	for len(pes) > 0 {
		hdr := []byte{0x47, pidVideo >> 8, pidVideo & 0xff, 0}
		if first {
			hdr[1] |= 0x40 // payload unit start
		}
		var af []byte // adaptation field after its length byte
		if first {
			pcr := pts - pcrLead
			if pcr < 0 {
				pcr += 1 << 33
			}
			flags := byte(0x10) // PCR
			if idr {
				flags |= 0x40 // random access
			}
			af = []byte{flags, byte(pcr >> 25), byte(pcr >> 17), byte(pcr >> 9), byte(pcr >> 1), byte(pcr<<7) | 0x7e, 0}
		}
		room := tsPacket - 4
		if af != nil {
			room -= 1 + len(af)
		}
		if len(pes) < room { // stuff the rest of the packet in the adaptation field
			if af == nil {
				af = []byte{}
				room--
				if len(pes) < room {
					af = append(af, 0x00) // no flags
					room--
				}
			}
			for len(pes) < room {
				af = append(af, 0xff)
				room--
			}
		}
		if af != nil {
			hdr[3] = 0x30 | cc&0x0f
			hdr = append(hdr, byte(len(af)))
			hdr = append(hdr, af...)
		} else {
			hdr[3] = 0x10 | cc&0x0f
		}
		b = append(b, hdr...)
		b = append(b, pes[:room]...)
		pes = pes[room:]
		cc++
		first = false
	}
	return b, cc
}
