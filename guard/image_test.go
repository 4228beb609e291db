package guard

import (
	"bytes"
	"compress/zlib"
	"context"
	"image"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/guard/guardtest"
)

func zlibBytes(s string) []byte {
	var b bytes.Buffer
	zw := zlib.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return b.Bytes()
}

// withChunk inserts a PNG chunk after IHDR.
func withChunk(img []byte, typ string, data []byte) []byte {
	const at = 8 + 8 + 13 + 4
	out := append([]byte(nil), img[:at]...)
	out = append(out, guardtest.Chunk(typ, data)...)
	return append(out, img[at:]...)
}

func TestImage(t *testing.T) {
	email := guardtest.Email()
	clean := guardtest.PNG("Software", "matplotlib version 3.6.3, https://matplotlib.org/")
	badCRC := append([]byte(nil), clean...)
	badCRC[40]++ // inside the tEXt chunk
	for _, tc := range []struct {
		name   string
		format string
		data   []byte
		// want: "same" (unchanged), "drop" (not an image), or "strip"
		// (a chunk or segment removed, still an image, secret gone)
		want string
	}{
		{"clean PNG keeps its text", "png", clean, "same"},
		{"tEXt", "png", guardtest.PNG("Author", email), "strip"},
		{"zTXt", "png", withChunk(clean, "zTXt", append([]byte("Comment\x00\x00"), zlibBytes("mail "+email)...)), "strip"},
		{"iTXt", "png", withChunk(clean, "iTXt", []byte("Comment\x00\x00\x00en\x00\x00mail "+email)), "strip"},
		{"compressed iTXt", "png", withChunk(clean, "iTXt", append([]byte("Comment\x00\x01\x00en\x00\x00"), zlibBytes(email)...)), "strip"},
		{"private chunk", "png", withChunk(clean, "prVt", []byte("\x00\x01"+email+"\x02")), "strip"},
		{"zTXt that does not inflate", "png", withChunk(clean, "zTXt", []byte("Comment\x00\x00not zlib")), "strip"},
		{"data after IEND", "png", append(append([]byte(nil), clean...), "tail "+email...), "strip"},
		{"not a PNG", "png", []byte("not a png " + email), "drop"},
		{"text with a PNG signature", "png", []byte("\x89PNG\r\n\x1a\n" + email), "drop"},
		{"bad CRC", "png", badCRC, "drop"},
		{"truncated", "png", clean[:len(clean)-5], "drop"},
		{"a JPEG as PNG", "png", guardtest.JPEG("x"), "drop"},
		{"clean JPEG", "jpeg", guardtest.JPEG("made with care"), "same"},
		{"JPEG comment", "jpeg", guardtest.JPEG("by " + email), "strip"},
		{"JPEG after EOI", "jpeg", append(guardtest.JPEG("x"), email...), "strip"},
		{"not a JPEG", "jpeg", []byte("\xff\xd8\xff" + email), "drop"},
		{"unknown format", "gif", clean, "drop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log auditLog
			g := newTestGuard(t, Config{Audit: log.audit})
			out, marker := g.Image(context.Background(), "t", tc.format, tc.data)
			switch tc.want {
			case "same":
				if marker != "" || !bytes.Equal(out, tc.data) || len(log.events) != 0 {
					t.Fatalf("changed: marker %q, %d -> %d bytes, events %v", marker, len(tc.data), len(out), log.events)
				}
			case "drop":
				if out != nil || marker != "[REDACTED:INVALID_IMAGE]" {
					t.Fatalf("not dropped: marker %q, %d bytes", marker, len(out))
				}
				if len(log.events) != 1 || log.events[0].Type != TypeInvalidImage {
					t.Fatalf("events %+v", log.events)
				}
			case "strip":
				if marker != "" || len(out) >= len(tc.data) || bytes.Contains(out, []byte(email)) {
					t.Fatalf("not stripped: marker %q, %d -> %d bytes", marker, len(tc.data), len(out))
				}
				if _, name, err := image.DecodeConfig(bytes.NewReader(out)); err != nil || name != tc.format {
					t.Fatalf("stripped image does not decode: %s %v", name, err)
				}
			}
		})
	}
}

func TestImageReportAndOff(t *testing.T) {
	email := guardtest.Email()
	img := guardtest.PNG("Author", email)
	var log auditLog
	g := newTestGuard(t, Config{Mode: ModeReport, Audit: log.audit})
	for _, data := range [][]byte{img, []byte("no image " + email)} {
		out, marker := g.Image(context.Background(), "t", "png", data)
		if marker != "" || !bytes.Equal(out, data) {
			t.Fatalf("report mode changed the image: %q", marker)
		}
	}
	if len(log.events) != 2 || log.events[0].Type != TypeEmail || log.events[1].Type != TypeInvalidImage {
		t.Fatalf("report events %+v", log.events)
	}
	off := WithMode(context.Background(), ModeOff)
	if out, marker := g.Image(off, "t", "png", []byte("anything")); marker != "" || string(out) != "anything" {
		t.Fatalf("off mode: %q %q", out, marker)
	}
	if strings.Contains(log.events[0].HMAC, email) {
		t.Fatal("the audit event holds the value")
	}
}
