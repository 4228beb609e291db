package guard

import (
	"testing"

	"github.com/sandlot/sandlot/guard/guardtest"
)

func TestFormat(t *testing.T) {
	tar := make([]byte, 512)
	copy(tar, "notes.txt")
	copy(tar[257:], "ustar\x0000")
	for _, tc := range []struct {
		name string
		head []byte
		want string
	}{
		{"png", guardtest.PNG("k", "v"), "png"},
		{"jpeg", guardtest.JPEG("c"), "jpeg"},
		{"zip", []byte("PK\x03\x04\x14\x00"), "zip"},
		{"gzip", []byte("\x1f\x8b\x08\x00"), "gzip"},
		{"tar", tar, "tar"},
		{"pdf", []byte("%PDF-1.7\n"), "pdf"},
		{"sqlite", []byte("SQLite format 3\x00\x10\x00"), "sqlite"},
		{"elf", []byte("\x7fELF\x02\x01\x01"), "elf"},
		{"webp", []byte("RIFF\x24\x00\x00\x00WEBPVP8 "), "webp"},
		{"riff that is no known format", []byte("RIFF\x24\x00\x00\x00XXXX"), ""},
		{"text", []byte("hello\n"), ""},
		{"NUL first", []byte("\x00hello"), ""},
		{"invalid UTF-8 first", []byte("\xffhello"), ""},
		{"a UTF-16 BOM", []byte("\xff\xfeh\x00i\x00"), ""},
		{"truncated signature", []byte("\x89PN"), ""},
		{"empty", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Format(tc.head); got != tc.want {
				t.Errorf("Format = %q, want %q", got, tc.want)
			}
		})
	}
}
