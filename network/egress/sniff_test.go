package egress

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestSniff(t *testing.T) {
	tests := []struct {
		name  string
		send  func(c net.Conn)
		kind  kind
		claim string
	}{
		{"tls with sni", func(c net.Conn) {
			tls.Client(c, &tls.Config{ServerName: "API.Example.test", InsecureSkipVerify: true}).Handshake()
		}, kindTLS, "API.Example.test"},
		{"tls without sni", func(c net.Conn) {
			tls.Client(c, &tls.Config{InsecureSkipVerify: true}).Handshake()
		}, kindTLS, ""},
		{"http", func(c net.Conn) {
			io.WriteString(c, "GET /x HTTP/1.1\r\nHost: www.example.test:8080\r\nUser-Agent: t\r\n\r\n")
		}, kindHTTP, "www.example.test:8080"},
		{"http in small pieces", func(c net.Conn) {
			for _, p := range []string{"PO", "ST / HTTP/1.1\r\nHo", "st: a.test\r\n", "\r\n"} {
				io.WriteString(c, p)
				time.Sleep(10 * time.Millisecond)
			}
		}, kindHTTP, "a.test"},
		{"absolute form", func(c net.Conn) {
			io.WriteString(c, "GET http://b.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n")
		}, kindHTTP, "b.test"},
		{"ssh", func(c net.Conn) { io.WriteString(c, "SSH-2.0-OpenSSH_9.2\r\n") }, kindOther, ""},
		{"silent client", func(c net.Conn) {}, kindOther, ""},
		{"endless head", func(c net.Conn) {
			io.WriteString(c, "GET / HTTP/1.1\r\nX: "+strings.Repeat("a", maxHead)+"\r\n\r\n")
		}, kindOther, ""},
		{"garbage record", func(c net.Conn) { c.Write([]byte{0x16, 3, 1, 0, 5, 1, 2, 3, 4, 5}) }, kindTLS, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			go tt.send(b)
			// net.Pipe has no buffer: drain what sniff does not read, so the
			// sender is not stuck.
			br := bufio.NewReaderSize(a, peekBuffer)
			k, claim := sniff(a, br, time.Now().Add(300*time.Millisecond))
			if k != tt.kind || claim != tt.claim {
				t.Errorf("sniff = %v %q, want %v %q", k, claim, tt.kind, tt.claim)
			}
		})
	}
}
