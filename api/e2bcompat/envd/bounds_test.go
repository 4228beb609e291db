package envd_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
)

// gzipBomb returns about size bytes of gzip that expand to a JSON object
// {"path":"aaaa…"} hundreds of MiB long (deflate tops out near 1000:1).
func gzipBomb(t *testing.T, size int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write([]byte(`{"path":"`))
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	for buf.Len() < size {
		zw.Write(chunk)
	}
	zw.Write([]byte(`"}`))
	zw.Close()
	return buf.Bytes()
}

// A 256 KiB gzip body on envd's Connect routes, unary and streaming, must
// be refused with a 4xx while the daemon's memory stays put; before the
// read and decompression limits it expanded to hundreds of MiB and the
// JSON decoder took the process to about 1 GiB.
func TestConnectGzipBomb(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	bomb := gzipBomb(t, 256<<10)
	var streamed bytes.Buffer
	streamed.WriteByte(1) // compressed envelope
	binary.Write(&streamed, binary.BigEndian, uint32(len(bomb)))
	streamed.Write(bomb)
	for _, tc := range []struct {
		name, path string
		body       []byte
		hdr        []string
	}{
		{"unary", "/filesystem.Filesystem/Stat", bomb,
			[]string{"Content-Type", "application/json", "Content-Encoding", "gzip"}},
		{"stream", "/process.Process/Start", streamed.Bytes(),
			[]string{"Content-Type", "application/connect+json", "Connect-Content-Encoding", "gzip"}},
		{"uncompressed", "/filesystem.Filesystem/Stat", []byte(`{"path":"` + strings.Repeat("a", 20<<20) + `"}`),
			[]string{"Content-Type", "application/json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var status int
			var body []byte
			grew := e2bcompattest.PeakRSSGrowth(t, func() {
				hdr := append(e.Headers(sb, "49983"), "Connect-Protocol-Version", "1")
				resp := e.Do("POST", tc.path, bytes.NewReader(tc.body), append(hdr, tc.hdr...)...)
				status = resp.StatusCode
				body, _ = io.ReadAll(resp.Body)
			})
			if tc.name == "stream" {
				body = streamEnd(t, body)
			}
			t.Logf("status %d, peak RSS growth %d MiB, body %.200q", status, grew>>20, body)
			if grew > 100<<20 {
				t.Errorf("peak RSS grew by %d MiB on a %d KiB body", grew>>20, len(tc.body)>>10)
			}
			// Unary errors are HTTP statuses; a stream's error is its
			// end-of-stream envelope.
			if tc.name != "stream" && (status < 400 || status >= 500) {
				t.Errorf("status %d, want a 4xx", status)
			}
			if !strings.Contains(string(body), "resource_exhausted") {
				t.Errorf("body %.200q does not say resource_exhausted", body)
			}
		})
	}
}

// streamEnd returns the body of the end-of-stream envelope of a Connect
// stream, decompressed when its flag says so.
func streamEnd(t *testing.T, b []byte) []byte {
	t.Helper()
	for len(b) >= 5 {
		flag, n := b[0], binary.BigEndian.Uint32(b[1:5])
		if int(n) > len(b)-5 {
			t.Fatalf("truncated envelope")
		}
		msg := b[5 : 5+n]
		b = b[5+n:]
		if flag&2 == 0 {
			continue
		}
		if flag&1 != 0 {
			zr, err := gzip.NewReader(bytes.NewReader(msg))
			if err != nil {
				t.Fatal(err)
			}
			msg, _ = io.ReadAll(io.LimitReader(zr, 1<<20))
		}
		return msg
	}
	t.Fatalf("no end-of-stream envelope")
	return nil
}

// files.write(path, data, {gzip: true}) sends a gzip octet-stream: the file
// holds the inflated bytes. Inflating stops at MaxUploadBytes: a bomb is a
// 4xx, the daemon's memory stays put and no partial file is left.
func TestGzipUpload(t *testing.T) {
	e := e2bcompattest.NewEnv(t, e2bcompattest.Options{Config: e2bcompat.Config{MaxUploadBytes: 8 << 20}})
	sb := e.Create(key1, `{}`)
	hdr := append(e.Headers(sb, "49983"), "Content-Type", "application/octet-stream", "Content-Encoding", "gzip")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("hello, inflated"))
	zw.Close()
	resp := e.Do("POST", "/files?path=/home/user/g.txt", bytes.NewReader(gz.Bytes()), hdr...)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	got, _ := io.ReadAll(e.Do("GET", "/files?path=/home/user/g.txt", nil, e.Headers(sb, "49983")...).Body)
	if string(got) != "hello, inflated" {
		t.Fatalf("stored %q, want the inflated text", got)
	}

	resp = e.Do("POST", "/files?path=/home/user/g.txt", strings.NewReader("not gzip"), hdr...)
	if resp.StatusCode != 400 {
		t.Fatalf("corrupt gzip: status %d, want 400", resp.StatusCode)
	}

	bomb := gzipBomb(t, 256<<10) // inflates to about 256 MiB
	var status int
	var body []byte
	grew := e2bcompattest.PeakRSSGrowth(t, func() {
		resp := e.Do("POST", "/files?path=/home/user/bomb", bytes.NewReader(bomb), hdr...)
		status = resp.StatusCode
		body, _ = io.ReadAll(resp.Body)
	})
	t.Logf("bomb: status %d, peak RSS growth %d MiB, body %.200s", status, grew>>20, body)
	if status < 400 || status >= 500 || !strings.Contains(string(body), "after decompression") {
		t.Fatalf("bomb: status %d %s, want a 4xx that says why", status, body)
	}
	if grew > 100<<20 {
		t.Errorf("peak RSS grew by %d MiB on a %d KiB body", grew>>20, len(bomb)>>10)
	}
	resp = e.Do("GET", "/files?path=/home/user/bomb", nil, e.Headers(sb, "49983")...)
	if resp.StatusCode != 404 {
		t.Fatalf("partial bomb file left: GET status %d", resp.StatusCode)
	}
}

// A command that writes 256 MiB to a stream whose client does not read:
// the daemon's queue for that stream is bounded, and once the client reads
// again it gets a notice of the gap, the tail of the output and an end
// event that says output was dropped. Before the bound the queue held the
// whole flood.
func TestProcessOutputFlood(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	hdr := append(e.Headers(sb, "49983"), "Content-Type", "application/connect+json", "Connect-Protocol-Version", "1")
	const cmd = `head -c 268435456 /dev/zero; echo THE-END`
	body := `{"process":{"cmd":"/bin/bash","args":["-c",` + strconv.Quote(cmd) + `]}}`
	var resp *http.Response
	grew := e2bcompattest.PeakRSSGrowth(t, func() {
		resp = e.Do("POST", "/process.Process/Start", frame(body), hdr...)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		// Read nothing until the process is gone.
		waitNoProcess(t, e, sb)
	})
	t.Logf("peak RSS growth while the client stalled: %d MiB", grew>>20)
	if grew > 100<<20 {
		t.Errorf("peak RSS grew by %d MiB while a client stalled on a 256 MiB flood", grew>>20)
	}
	envs := readEnvelopes(t, resp.Body)
	var stdout, stderr []byte
	var end *struct {
		ExitCode int
		Error    string
	}
	for _, env := range envs {
		var ev struct {
			Event struct {
				Data *struct{ Stdout, Stderr []byte }
				End  *struct {
					ExitCode int
					Error    string
				}
			}
		}
		if env.Flag != 0 {
			continue
		}
		if err := json.Unmarshal([]byte(env.Body), &ev); err != nil {
			t.Fatal(err)
		}
		if d := ev.Event.Data; d != nil {
			stdout, stderr = append(stdout, d.Stdout...), append(stderr, d.Stderr...)
		}
		if ev.Event.End != nil {
			end = ev.Event.End
		}
	}
	if !bytes.HasSuffix(stdout, []byte("THE-END\n")) {
		t.Errorf("the tail was lost: stdout ends %q", stdout[max(0, len(stdout)-32):])
	}
	if len(stdout) >= 256<<20 {
		t.Errorf("all %d bytes were queued", len(stdout))
	}
	if !strings.Contains(string(stderr), "bytes of output dropped here") {
		t.Errorf("no notice of the gap in stderr %.200q", stderr)
	}
	if end == nil || end.ExitCode != 0 || !strings.Contains(end.Error, "bytes dropped") {
		t.Errorf("end event %+v does not report the drop", end)
	}
}

// waitNoProcess polls Process.List until the sandbox runs no process.
func waitNoProcess(t *testing.T, e *env, sb created) {
	t.Helper()
	hdr := append(e.Headers(sb, "49983"), "Content-Type", "application/json", "Connect-Protocol-Version", "1")
	for range 600 {
		resp := e.Do("POST", "/process.Process/List", strings.NewReader(`{}`), hdr...)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("list: %d %s", resp.StatusCode, b)
		}
		if !strings.Contains(string(b), "pid") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the flood did not end within a minute")
}

// A multipart upload whose body ends inside a part (the client went away,
// a proxy cut it) is a 400 that leaves no file, not a complete upload of
// the part's first bytes. Before, the cut part was stored truncated and
// the answer was 200.
func TestTruncatedMultipartUpload(t *testing.T) {
	e := newEnv(t)
	sb := e.Create(key1, `{}`)
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", "/home/user/cut.txt")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write([]byte("the first bytes of a part whose end never comes"))
	// No mw.Close(): the closing boundary never arrives.
	hdr := append(e.Headers(sb, "49983"), "Content-Type", mw.FormDataContentType())
	resp := e.Do("POST", "/files", bytes.NewReader(buf.Bytes()), hdr...)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 {
		t.Fatalf("a body cut inside its part: %d %s, want 400", resp.StatusCode, b)
	}
	if resp := e.Do("GET", "/files?path=/home/user/cut.txt", nil, e.Headers(sb, "49983")...); resp.StatusCode != 404 {
		t.Fatalf("the cut part was stored: GET %d", resp.StatusCode)
	}
}
