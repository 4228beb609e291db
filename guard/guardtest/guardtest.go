// Package guardtest makes test inputs for the egress guard: secrets made
// at test time (so no real-looking secret is committed) and images that
// carry text in their metadata.
package guardtest

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strings"
)

// GitHubToken returns a random ghp_ token whose CRC32 checksum holds, so
// the guard finds it at full confidence.
func GitHubToken() string {
	const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	body := Alnum(30)
	v := crc32.ChecksumIEEE([]byte(body))
	var sum [6]byte
	for k := 5; k >= 0; k-- {
		sum[k] = base62[v%62]
		v /= 62
	}
	return "ghp_" + body + string(sum[:])
}

// Email returns a random address at example.org (a real public suffix).
func Email() string {
	// Letters only: a random run of digits was now and then a card or a
	// phone number of its own, which changed what a test found.
	b := make([]byte, 12)
	rand.Read(b)
	for i := range b {
		b[i] = 'a' + b[i]%26
	}
	return "ops." + string(b) + "@exemplar.ie"
}

// Alnum returns n random characters of [A-Za-z0-9].
func Alnum(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func picture() image.Image {
	img := image.NewRGBA(image.Rect(0, 0, 16, 8))
	for x := 0; x < 16; x++ {
		for y := 0; y < 8; y++ {
			img.Set(x, y, color.RGBA{uint8(x * 16), uint8(y * 32), 128, 255})
		}
	}
	return img
}

// PNG returns a small PNG with a tEXt chunk (keyword, text) after IHDR,
// as matplotlib writes its "Software" and user metadata.
func PNG(keyword, text string) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, picture()); err != nil {
		panic(err)
	}
	raw := b.Bytes()
	ihdrEnd := 8 + 8 + 13 + 4 // signature, IHDR header, data, CRC
	out := append([]byte(nil), raw[:ihdrEnd]...)
	out = append(out, Chunk("tEXt", []byte(keyword+"\x00"+text))...)
	return append(out, raw[ihdrEnd:]...)
}

// Chunk encodes one PNG chunk: length, type, data and CRC.
func Chunk(typ string, data []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	out = append(out, typ...)
	out = append(out, data...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(out[4:]))
}

// JPEG returns a small JPEG with a COM (comment) segment after SOI.
func JPEG(comment string) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, picture(), nil); err != nil {
		panic(err)
	}
	raw := b.Bytes()
	seg := []byte{0xFF, 0xFE, 0, 0}
	binary.BigEndian.PutUint16(seg[2:], uint16(2+len(comment)))
	seg = append(seg, comment...)
	out := append([]byte(nil), raw[:2]...)
	out = append(out, seg...)
	return append(out, raw[2:]...)
}

// SecretText is a short text file with a GitHub token and an email, and
// the same text as the guard in enforce mode hands it out.
func SecretText() (file, want string) {
	file = "deploy token: " + GitHubToken() + "\ncontact: " + Email() + "\n"
	want = "deploy token: [REDACTED:GITHUB_TOKEN]\ncontact: [REDACTED:EMAIL]\n"
	return file, want
}

// LargeText is size bytes of text with an email straddling offset chunk,
// a token starting exactly at 2*chunk (when it fits), and a token ending
// one byte before the end; want is the file as the guard in enforce mode
// hands it out: each secret replaced by its marker, nothing else changed.
func LargeText(size, chunk int) (file, want string) {
	line := "lorem ipsum dolor sit amet, consectetur adipiscing elit\n"
	buf := bytes.Repeat([]byte(line), size/len(line)+1)[:size]
	var secrets, markers []string
	put := func(at int, s, marker string) {
		buf[at-1] = ' '
		copy(buf[at:], s)
		buf[at+len(s)] = '\n'
		secrets, markers = append(secrets, s), append(markers, marker)
	}
	put(chunk-10, Email(), "[REDACTED:EMAIL]")
	if 2*chunk+100 < size {
		put(2*chunk, GitHubToken(), "[REDACTED:GITHUB_TOKEN]")
	}
	put(size-41, GitHubToken(), "[REDACTED:GITHUB_TOKEN]")
	file = string(buf)
	want = file
	for i, s := range secrets {
		want = strings.Replace(want, s, markers[i], 1)
	}
	return file, want
}
