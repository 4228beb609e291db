package guard

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"

	"github.com/sandlot/sandlot/contexts"
)

// File implements contexts.Guard: a redactor for the bytes of one file,
// written in order from its start. The first SniffLen bytes decide what
// the file is (Format). Text, whatever bytes it holds, is redacted as
// Stream redacts output. A recognised binary format keeps its length: the
// printable ASCII runs in it are scanned as text and each finding's
// printable bytes are overwritten in place (see mask), and a PNG's chunk
// CRCs are recomputed so it stays valid. The mode is fixed when the file
// starts.
func (g *Guard) File(ctx context.Context, tenantID string) contexts.FileRedactor {
	mode := g.ModeOf(ctx, tenantID)
	if mode == ModeOff {
		return passFile{}
	}
	// Like Stream, the redactor lives for one read and keeps its ctx for
	// the Audit hook.
	return &file{st: &stream{g: g, ctx: ctx, tenant: tenantID, mode: mode, sec: g.declaredOf(ctx, tenantID), ents: g.entsOf(ctx, tenantID)}}
}

// Message is File for one message of a protocol that says what it is (a
// WebSocket text or binary message): no sniffing. Binary is redacted in
// place with its length kept, as a recognised binary format (a stray
// byte run that looks like an address must not change the length of a
// frame-exact stream such as a VNC session's); text as Stream redacts
// output.
func (g *Guard) Message(ctx context.Context, tenantID string, binary bool) contexts.FileRedactor {
	mode := g.ModeOf(ctx, tenantID)
	if mode == ModeOff {
		return passFile{}
	}
	f := &file{st: &stream{g: g, ctx: ctx, tenant: tenantID, mode: mode, sec: g.declaredOf(ctx, tenantID), ents: g.entsOf(ctx, tenantID)}, sniffd: true}
	if binary {
		f.bin = newBinFile(f.st, "binary")
	}
	return f
}

// FlushIdle releases what the redactor holds when the file's source went
// quiet (a response body streamed as it is written), as the stream's
// FlushIdle does: the start of a known value or of a private key block
// stays held. The format is decided on what arrived, if it was not yet.
func (f *file) FlushIdle() []byte {
	var p []byte
	if !f.sniffd {
		if len(f.head) == 0 {
			return nil
		}
		p = f.sniff()
	}
	if f.st.inPEM || bytes.Contains(f.st.pending, []byte("-----")) {
		return f.write(p, false)
	}
	f.st.idle = true
	defer func() { f.st.idle = false }()
	return f.write(p, true)
}

type passFile struct{}

func (passFile) Write(p []byte) []byte { return p }
func (passFile) Flush() []byte         { return nil }

// file is one file's redaction state. Not safe for concurrent use.
type file struct {
	st     *stream
	head   []byte // bytes held until the format is known
	sniffd bool
	bin    *binFile // nil for text
}

var _ contexts.FileRedactor = (*file)(nil)

// Write implements contexts.FileRedactor.
func (f *file) Write(p []byte) []byte {
	if !f.sniffd {
		f.head = append(f.head, p...)
		if len(f.head) < SniffLen {
			return nil
		}
		p = f.sniff()
	}
	return f.write(p, false)
}

// Flush implements contexts.FileRedactor.
func (f *file) Flush() []byte {
	var p []byte
	if !f.sniffd {
		p = f.sniff()
	}
	return f.write(p, true)
}

// sniff decides the format and returns the held bytes.
func (f *file) sniff() []byte {
	f.sniffd = true
	p := f.head
	f.head = nil
	if format := Format(p); format != "" {
		f.bin = newBinFile(f.st, format)
	}
	return p
}

func (f *file) write(p []byte, final bool) []byte {
	if f.bin != nil {
		return f.bin.write(p, final)
	}
	out := f.st.process(string(p), final)
	if f.st.mode == ModeReport {
		return p
	}
	return []byte(out)
}

// binFile redacts a binary format in place. Its stream scans a view of the
// bytes of the same length, in which everything but printable ASCII, tab,
// CR and LF reads as a line break (and so do a PNG's chunk headers and
// CRCs), so file offsets and view offsets are the same and a value never
// spans two text runs.
type binFile struct {
	st        *stream
	raw, view []byte // bytes from done on, not emitted yet, and their view
	done      int    // file offset of raw[0]
	masks     []span // ranges to overwrite, ordered, all below st.base
	png       *pngChunks
	fix       *pngFix
	run       int // length of the run of text the last write ended with
}

type span struct {
	typ        string
	start, end int
}

func newBinFile(st *stream, format string) *binFile {
	b := &binFile{st: st}
	st.binary = true
	if format == "png" {
		b.png = &pngChunks{left: 8}
	}
	if st.mode == ModeReport {
		return b
	}
	st.spans = func(typ string, start, end int) { b.masks = append(b.masks, span{typ, start, end}) }
	if format == "png" {
		b.fix = &pngFix{walk: pngChunks{left: 8}}
	}
	return b
}

func (b *binFile) write(p []byte, final bool) []byte {
	view := b.textView(p)
	b.st.process(string(view), final)
	if b.st.mode == ModeReport {
		return p
	}
	b.raw = append(b.raw, p...)
	b.view = append(b.view, view...)
	// Everything before the stream's base is decided.
	n := b.st.base - b.done
	if n == 0 {
		return nil
	}
	out := b.raw[:n:n]
	var orig []byte
	if len(b.masks) > 0 {
		orig = append([]byte(nil), out...)
		for _, m := range b.masks {
			mask(out[m.start-b.done:m.end-b.done], b.view[m.start-b.done:m.end-b.done], m.typ)
		}
		b.masks = b.masks[:0]
	}
	if b.fix != nil {
		b.fix.fix(orig, out)
	}
	// Out keeps its bytes: appends go past them, into a new array once
	// this one is full.
	b.raw, b.view = b.raw[n:], b.view[n:]
	b.done += n
	return out
}

// minRun is the shortest run of text a binary view keeps, as strings(1)
// does: no value is shorter, and random bytes make many shorter runs.
const minRun = 4

// viewByte maps a byte of binary data to its view: printable ASCII, tab, CR
// and LF stay, anything else reads as LF.
var viewByte = func() (t [256]byte) {
	for c := range t {
		t[c] = '\n'
		if isText(byte(c)) {
			t[c] = byte(c)
		}
	}
	return t
}()

// textView maps p to bytes of the same length that keep the runs of
// printable ASCII, tab, CR and LF of at least minRun bytes, and turn every
// other byte, and a PNG's structure, into LF. A run that ends p is kept
// whatever its length (it may go on in the next write); one that starts p
// counts the bytes of it the last write ended with.
func (b *binFile) textView(p []byte) []byte {
	v := make([]byte, len(p))
	for i, c := range p {
		v[i] = viewByte[c]
	}
	for i := 0; b.png != nil && i < len(p); {
		field, n := b.png.step(p[i:])
		if field != pngData && field != pngDone || field == pngData && pngCompressed(b.png.hdr[4:]) {
			for k := i; k < i+n; k++ {
				v[k] = '\n'
			}
		}
		i += n
	}
	start, carry := 0, b.run
	for i, c := range v {
		if c != '\n' {
			continue
		}
		if n := i - start + carry; n > 0 && n < minRun {
			for k := start; k < i; k++ {
				v[k] = '\n'
			}
		}
		start, carry = i+1, 0
	}
	b.run = len(v) - start + carry
	return v
}

func isText(c byte) bool { return c >= 0x20 && c < 0x7f || c == '\t' || c == '\r' || c == '\n' }

// textView is the view of data with no structure known.
func textView(p []byte) string {
	return string((&binFile{}).textView(p))
}

// mask overwrites the printable bytes of a finding that are text in its
// view (not CR, LF or the binary bytes around them, so the structure
// stays) with its marker, then '*'; a finding shorter than its marker
// becomes all '*'.
func mask(b, view []byte, typ string) {
	fill := Marker(typ)
	n := 0
	for i, c := range b {
		if maskable(c, view[i]) {
			n++
		}
	}
	if n < len(fill) {
		fill = ""
	}
	k := 0
	for i, c := range b {
		if !maskable(c, view[i]) {
			continue
		}
		if k < len(fill) {
			b[i] = fill[k]
		} else {
			b[i] = '*'
		}
		k++
	}
}

func maskable(c, view byte) bool { return c == view && (c >= 0x20 && c < 0x7f || c == '\t') }

// PNG chunk fields.
const (
	pngSig = iota
	pngHeader
	pngData
	pngCRC
	pngDone // after IEND, or not a chunk
)

// pngChunks follows a PNG's chunk structure as its bytes go by.
type pngChunks struct {
	field int
	left  int // bytes left in the field
	hdr   [8]byte
	iend  bool
}

// step consumes the bytes at the start of p that belong to the current
// field and says which field that was.
func (w *pngChunks) step(p []byte) (field, n int) {
	field = w.field
	if field == pngDone {
		return field, len(p)
	}
	n = min(w.left, len(p))
	if field == pngHeader {
		copy(w.hdr[8-w.left:], p[:n])
	}
	if w.left -= n; w.left > 0 {
		return field, n
	}
	switch field {
	case pngSig:
		w.field, w.left = pngHeader, 8
	case pngHeader:
		l := binary.BigEndian.Uint32(w.hdr[:4])
		w.iend = string(w.hdr[4:]) == "IEND"
		w.field, w.left = pngData, int(l)
		if l > 1<<31-1 || !pngType(w.hdr[4:]) {
			w.field = pngDone
		} else if l == 0 {
			w.field, w.left = pngCRC, 4
		}
	case pngData:
		w.field, w.left = pngCRC, 4
	case pngCRC:
		w.field, w.left = pngHeader, 8
		if w.iend {
			w.field = pngDone
		}
	}
	return field, n
}

// pngCompressed says whether a chunk's data is deflated (image data, APNG
// frames, zTXt, the ICC profile): opaque to the scan, whose chance
// matches there would only break the stream's checksum (docs/guard.md).
func pngCompressed(t []byte) bool {
	switch string(t) {
	case "IDAT", "fdAT", "zTXt", "iCCP":
		return true
	}
	return false
}

func pngType(t []byte) bool {
	for _, c := range t {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

// pngFix recomputes the CRC of each PNG chunk whose data was masked, as the
// bytes go out. The data of a chunk always goes out before its CRC, so no
// byte is held back. It never restores a masked byte.
type pngFix struct {
	walk    pngChunks
	crc     uint32
	changed bool
}

func (f *pngFix) fix(orig, out []byte) {
	for i := 0; i < len(out); {
		field, n := f.walk.step(out[i:])
		seg := out[i : i+n]
		switch field {
		case pngHeader:
			if f.walk.field == pngData || f.walk.field == pngCRC {
				// The header is complete: the CRC covers the type.
				f.crc = crc32.Update(0, crc32.IEEETable, f.walk.hdr[4:])
				f.changed = false
			}
		case pngData:
			f.crc = crc32.Update(f.crc, crc32.IEEETable, seg)
			f.changed = f.changed || orig != nil && string(orig[i:i+n]) != string(seg)
		case pngCRC:
			if f.changed {
				for k := range seg {
					left := f.walk.left + n - k // bytes of the CRC left, this one included
					if f.walk.field != pngCRC {
						left = n - k
					}
					seg[k] = byte(f.crc >> (8 * (left - 1)))
				}
			}
		case pngDone:
			return
		}
		i += n
	}
}
