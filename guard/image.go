package guard

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	_ "image/jpeg" // image.DecodeConfig for JPEG results
	_ "image/png"  // and for PNG results
	"io"
	"strings"
	"unicode/utf8"
)

// TypeInvalidImage is the finding type of an image result that is not
// an image of its declared format.
const TypeInvalidImage = "INVALID_IMAGE"

// maxInflate bounds the decompressed metadata (zTXt, compressed iTXt)
// inspected in one image; metadata past it is dropped unread.
const maxInflate = 1 << 20

// Image implements contexts.Guard for image results (run_code's PNG and
// JPEG). data must be a well-formed image of format ("png" or "jpeg"):
// its signature, its chunk or segment structure (PNG CRCs included) and
// image.DecodeConfig are checked. Its metadata is scanned: PNG text chunks
// decoded (tEXt, iTXt, zTXt), every other ancillary chunk and every JPEG
// APPn and COM segment by its printable runs. In enforce mode a chunk or
// segment with a finding is removed, as is anything after the image's end;
// pixels are not inspected. Data that is not such an image is a finding of
// type INVALID_IMAGE: in enforce mode Image returns nil and the marker to
// show in its place. Report mode returns data unchanged and audits; off
// mode checks nothing.
func (g *Guard) Image(ctx context.Context, tenantID, format string, data []byte) ([]byte, string) {
	mode := g.ModeOf(ctx, tenantID)
	if mode == ModeOff {
		return data, ""
	}
	var segs []segment
	var err error
	switch format {
	case "png":
		segs, err = pngSegments(data)
	case "jpeg":
		segs, err = jpegSegments(data)
	default:
		err = errors.New("not an image format")
	}
	if err == nil {
		var cfg image.Config
		var name string
		cfg, name, err = image.DecodeConfig(bytes.NewReader(data))
		if err == nil && (name != format || cfg.Width <= 0 || cfg.Height <= 0) {
			err = errors.New("not a " + format)
		}
	}
	if err != nil {
		g.record(ctx, tenantID, mode, Finding{Type: TypeInvalidImage, End: len(data), Confidence: 1}, string(data), 0)
		if mode == ModeReport {
			return data, ""
		}
		return nil, Marker(TypeInvalidImage)
	}
	var drop []segment
	dec := g.declaredOf(ctx, tenantID)
	for _, s := range segs {
		bad := s.trailer
		if s.meta {
			text, ok := s.text(data)
			bad = bad || !ok
			for _, f := range withDeclared(g.scan(text), dec, text) {
				bad = true
				g.record(ctx, tenantID, mode, Finding{Type: f.Type, Start: s.start, End: s.end, Confidence: f.Confidence}, text[f.Start:f.End], 0)
			}
		}
		if bad {
			drop = append(drop, s)
		}
	}
	out := data
	if mode != ModeReport && len(drop) > 0 {
		out = make([]byte, 0, len(data))
		last := 0
		for _, s := range drop {
			out = append(out, data[last:s.start]...)
			last = s.end
		}
		out = append(out, data[last:]...)
	}
	// A known value anywhere else in the bytes (pixel data stored
	// uncompressed, a critical chunk): the image is withheld.
	if dec.in(out) {
		g.record(ctx, tenantID, mode, Finding{Type: TypeSecret, End: len(data), Confidence: 1}, string(data), 0)
		if mode != ModeReport {
			return nil, Marker(TypeSecret)
		}
	}
	return out, ""
}

// segment is a byte range of an image: a metadata chunk or segment to
// scan, or the data after the image's end.
type segment struct {
	start, end int
	meta       bool
	trailer    bool
	// text returns what to scan and whether it could be read whole.
	text func(data []byte) (string, bool)
}

var errImage = errors.New("malformed image")

// pngSegments walks a PNG's chunks: it checks the signature, that IHDR
// comes first, every length and CRC, that critical chunks are known and
// that IEND ends it; it returns the ancillary chunks (but the frame data
// of animated PNGs) and any trailing data.
func pngSegments(d []byte) ([]segment, error) {
	const sig = "\x89PNG\r\n\x1a\n"
	if !bytes.HasPrefix(d, []byte(sig)) {
		return nil, errImage
	}
	var segs []segment
	inflated := 0
	for i, n := len(sig), 0; ; n++ {
		if len(d)-i < 12 {
			return nil, errImage
		}
		l := int(binary.BigEndian.Uint32(d[i:]))
		typ := string(d[i+4 : i+8])
		if l > len(d)-i-12 {
			return nil, errImage
		}
		end := i + 12 + l
		if crc32.ChecksumIEEE(d[i+4:i+8+l]) != binary.BigEndian.Uint32(d[i+8+l:]) {
			return nil, errImage
		}
		if (n == 0) != (typ == "IHDR") {
			return nil, errImage
		}
		data := d[i+8 : i+8+l]
		switch {
		case typ == "IEND":
			if end < len(d) {
				segs = append(segs, segment{start: end, end: len(d), trailer: true})
			}
			return segs, nil
		case typ == "IHDR" || typ == "PLTE" || typ == "IDAT" || typ == "fdAT":
		case typ[0]&0x20 == 0: // an unknown critical chunk
			return nil, errImage
		default:
			segs = append(segs, segment{start: i, end: end, meta: true, text: pngText(typ, data, &inflated)})
		}
		i = end
	}
}

// pngText returns the scanner for one ancillary chunk's data.
func pngText(typ string, data []byte, inflated *int) func([]byte) (string, bool) {
	return func([]byte) (string, bool) {
		kw, rest, _ := bytes.Cut(data, []byte{0})
		switch typ {
		case "tEXt":
			return latin1(kw) + "\n" + latin1(rest), true
		case "zTXt":
			if len(rest) < 1 || rest[0] != 0 {
				return latin1(kw), false
			}
			t, ok := inflate(rest[1:], inflated)
			return latin1(kw) + "\n" + latin1(t), ok
		case "iTXt":
			if len(rest) < 2 {
				return latin1(kw), false
			}
			compressed := rest[0] == 1
			lang, rest, _ := bytes.Cut(rest[2:], []byte{0})
			trans, text, _ := bytes.Cut(rest, []byte{0})
			ok := true
			if compressed {
				text, ok = inflate(text, inflated)
			}
			return latin1(kw) + "\n" + string(lang) + "\n" + string(trans) + "\n" + string(text), ok
		}
		return textView(data), true
	}
}

// inflate decompresses zlib data, at most maxInflate bytes per image.
func inflate(b []byte, inflated *int) ([]byte, bool) {
	zr, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, false
	}
	defer zr.Close()
	room := maxInflate - *inflated
	out, err := io.ReadAll(io.LimitReader(zr, int64(room)+1))
	*inflated += len(out)
	if err != nil || len(out) > room {
		return nil, false
	}
	return out, true
}

// latin1 decodes ISO 8859-1 (PNG's tEXt encoding) to UTF-8.
func latin1(b []byte) string {
	var s strings.Builder
	s.Grow(len(b))
	for _, c := range b {
		s.WriteRune(rune(c))
	}
	return s.String()
}

// jpegSegments walks a JPEG's markers from SOI to EOI, through the
// entropy-coded data after each SOS, and returns the APPn and COM
// segments and any trailing data.
func jpegSegments(d []byte) ([]segment, error) {
	if len(d) < 4 || d[0] != 0xFF || d[1] != 0xD8 {
		return nil, errImage
	}
	var segs []segment
	frame := false
	for i := 2; ; {
		if i >= len(d) || d[i] != 0xFF {
			return nil, errImage
		}
		for i < len(d) && d[i] == 0xFF { // fill bytes
			i++
		}
		if i >= len(d) {
			return nil, errImage
		}
		m := d[i]
		start := i - 1
		i++
		switch {
		case m == 0xD9: // EOI
			if !frame {
				return nil, errImage
			}
			if i < len(d) {
				segs = append(segs, segment{start: i, end: len(d), trailer: true})
			}
			return segs, nil
		case m >= 0xD0 && m <= 0xD7 || m == 0x01: // standalone markers
			continue
		case m == 0x00 || m == 0xD8:
			return nil, errImage
		}
		if len(d)-i < 2 {
			return nil, errImage
		}
		l := int(binary.BigEndian.Uint16(d[i:]))
		if l < 2 || l > len(d)-i {
			return nil, errImage
		}
		end := i + l
		switch {
		case m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC:
			frame = true
		case m >= 0xE0 && m <= 0xEF || m == 0xFE:
			payload := d[i+2 : end]
			text := func([]byte) (string, bool) { return textView(payload), true }
			if m == 0xFE && utf8.Valid(payload) {
				text = func([]byte) (string, bool) { return string(payload), true }
			}
			segs = append(segs, segment{start: start, end: end, meta: true, text: text})
		}
		i = end
		if m == 0xDA { // SOS: entropy-coded data up to the next marker
			for i < len(d)-1 && (d[i] != 0xFF || d[i+1] == 0x00 || d[i+1] >= 0xD0 && d[i+1] <= 0xD7) {
				i++
			}
			if i >= len(d)-1 {
				return nil, errImage
			}
		}
	}
}
