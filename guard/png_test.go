package guard

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"hash/crc32"
	"image/png"
	"testing"

	"github.com/sandlot/sandlot/guard/guardtest"
)

// pngWithPixels is a valid 8-bit greyscale PNG, one row, whose IDAT is a
// zlib stream of stored (uncompressed) blocks: the row's bytes appear in
// the file as they are.
func pngWithPixels(t *testing.T, row []byte) []byte {
	t.Helper()
	chunk := func(typ string, data []byte) []byte {
		var b bytes.Buffer
		binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.WriteString(typ)
		b.Write(data)
		binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(typ), data...)))
		return b.Bytes()
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(len(row)))
	binary.BigEndian.PutUint32(ihdr[4:], 1)
	ihdr[8] = 8 // bit depth; colour type 0 (grey)
	var z bytes.Buffer
	zw, err := zlib.NewWriterLevel(&z, zlib.NoCompression)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(append([]byte{0}, row...)) // filter type none, then the row
	zw.Close()
	out := []byte("\x89PNG\r\n\x1a\n")
	out = append(out, chunk("IHDR", ihdr)...)
	out = append(out, chunk("IDAT", z.Bytes())...)
	out = append(out, chunk("IEND", nil)...)
	if _, err := png.Decode(bytes.NewReader(out)); err != nil {
		t.Fatalf("the test's PNG: %v", err)
	}
	return out
}

// TestFilePNGPixelsIntact: a PNG's image data (IDAT, compressed, so opaque
// to the scan) is not read as text. Printable runs in compressed pixels are
// chance, and masking one broke the image's zlib checksum: a desktop's
// screenshot failed to decode now and then ("incorrect data check"). The
// image stays a valid PNG with its pixels, and a tEXt chunk is still
// scanned.
func TestFilePNGPixelsIntact(t *testing.T) {
	g := newTestGuard(t, Config{})
	email := guardtest.Email()
	in := pngWithPixels(t, []byte("noise "+email+" noise"))
	got := redactFile(g, context.Background(), append([]byte(nil), in...), 7, 64)
	if _, err := png.Decode(bytes.NewReader(got)); err != nil {
		t.Fatalf("the guard broke the PNG's pixels: %v", err)
	}
	if !bytes.Equal(got, in) {
		t.Fatal("the PNG's image data was changed")
	}
	// Metadata is text: still redacted, the PNG still valid.
	meta := append([]byte(nil), in[:len(in)-12]...)
	var b bytes.Buffer
	data := []byte("Comment\x00mail " + email + " now")
	binary.Write(&b, binary.BigEndian, uint32(len(data)))
	b.WriteString("tEXt")
	b.Write(data)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte("tEXt"), data...)))
	meta = append(append(meta, b.Bytes()...), in[len(in)-12:]...)
	got = redactFile(g, context.Background(), meta, 5, 64)
	// The pixels keep theirs (opaque, as above); the comment's is masked.
	if bytes.Count(got, []byte(email)) != 1 || !bytes.Contains(got, []byte("mail [REDACTED:EMAIL]")) {
		t.Fatalf("the tEXt chunk's address left: %q", got)
	}
	if _, err := png.Decode(bytes.NewReader(got)); err != nil {
		t.Fatalf("the redacted PNG: %v", err)
	}
}
