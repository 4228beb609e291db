package guard

import "bytes"

// SniffLen is how many leading bytes Format needs to decide: tar's magic
// sits at offset 257.
const SniffLen = 265

// magic is one binary format's signature: the bytes at off, and for some
// formats a second signature further in.
type magic struct {
	name string
	off  int
	sig  string
	off2 int
	sig2 string
}

// formats are the binary formats the guard recognises, by signatures of
// at least four bytes (three for JPEG, whose next byte is a marker) so a
// text file does not become binary by accident. docs/guard.md lists them.
var formats = []magic{
	{name: "png", sig: "\x89PNG\r\n\x1a\n"},
	{name: "jpeg", sig: "\xff\xd8\xff"},
	{name: "gif", sig: "GIF87a"},
	{name: "gif", sig: "GIF89a"},
	{name: "webp", sig: "RIFF", off2: 8, sig2: "WEBP"},
	{name: "wav", sig: "RIFF", off2: 8, sig2: "WAVE"},
	{name: "tiff", sig: "II*\x00"},
	{name: "tiff", sig: "MM\x00*"},
	{name: "mp4", off: 4, sig: "ftyp"}, // also MOV, HEIC, AVIF
	{name: "ogg", sig: "OggS"},
	{name: "flac", sig: "fLaC"},
	{name: "pdf", sig: "%PDF-"},
	{name: "zip", sig: "PK\x03\x04"}, // also JAR, DOCX/XLSX/PPTX, ODF, wheels, NPZ
	{name: "zip", sig: "PK\x05\x06"}, // empty archive
	{name: "gzip", sig: "\x1f\x8b\x08"},
	{name: "bzip2", sig: "BZh", off2: 4, sig2: "1AY&SY"},
	{name: "xz", sig: "\xfd7zXZ\x00"},
	{name: "zstd", sig: "\x28\xb5\x2f\xfd"},
	{name: "7z", sig: "7z\xbc\xaf\x27\x1c"},
	{name: "rar", sig: "Rar!\x1a\x07"},
	{name: "tar", off: 257, sig: "ustar"},
	{name: "ar", sig: "!<arch>\n"}, // also .deb
	{name: "elf", sig: "\x7fELF"},
	{name: "wasm", sig: "\x00asm"},
	{name: "macho", sig: "\xcf\xfa\xed\xfe"},
	{name: "macho", sig: "\xce\xfa\xed\xfe"},
	{name: "class", sig: "\xca\xfe\xba\xbe"}, // also Mach-O universal
	{name: "sqlite", sig: "SQLite format 3\x00"},
	{name: "parquet", sig: "PAR1"},
	{name: "arrow", sig: "ARROW1"},
	{name: "hdf5", sig: "\x89HDF\r\n\x1a\n"},
	{name: "npy", sig: "\x93NUMPY"},
	{name: "ole", sig: "\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"}, // legacy Office
	{name: "woff", sig: "wOFF"},
	{name: "woff2", sig: "wOF2"},
	{name: "otf", sig: "OTTO"},
}

// Format names the binary format data starts with (its first SniffLen
// bytes, or all of a shorter file), or returns "" for text. Only formats
// recognised by their signature are binary; everything else is text,
// whatever bytes it holds.
func Format(head []byte) string {
	for _, m := range formats {
		if len(head) >= m.off+len(m.sig) && string(head[m.off:m.off+len(m.sig)]) == m.sig &&
			(m.sig2 == "" || len(head) >= m.off2+len(m.sig2) && bytes.Equal(head[m.off2:m.off2+len(m.sig2)], []byte(m.sig2))) {
			return m.name
		}
	}
	return ""
}
