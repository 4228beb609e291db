package e2b_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/api/e2bcompat"
	"github.com/sandlot/sandlot/api/e2bcompat/e2bcompattest"
	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/e2bwire"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/provider/e2b"
)

// interceptedSandbox creates a sandbox through sandlot's E2B handler (real
// manager, fake sandboxes) whose sandbox calls on one port and path are answered by fn
// instead: the hostile or limited server of each test.
func interceptedSandbox(t *testing.T, port, path string, fn http.HandlerFunc) contexts.Sandbox {
	t.Helper()
	h := e2bcompattest.NewEnv(t, e2bcompattest.Options{Config: e2bcompat.Config{Tenants: e2bcompattest.Tenants{testKey: "tenant-1"}}}).H
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(e2bwire.HeaderSandboxPort) == port && r.URL.Path == path {
			fn(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p := e2b.New(e2b.Config{APIKey: testKey, APIURL: srv.URL, SandboxURL: srv.URL, ConnectTimeout: 5 * time.Second})
	sb, err := p.Create(context.Background(), contexts.Spec{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// countingWriter counts what a handler writes.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// Reading a file chunk by chunk fetches each chunk once: a ranged GET
// against envd (which serves Range like http.ServeContent). Before, every
// 1 MiB chunk downloaded the whole file, 8 MiB × 8 for this one.
func TestReadFileRanged(t *testing.T) {
	file := make([]byte, 8<<20+12345)
	for i := range file {
		file[i] = byte(i * 7 % 251)
	}
	for _, tc := range []struct {
		name   string
		ranges bool // the server honours Range
		bound  int64
	}{
		{"range", true, int64(len(file)) + agent.ChunkSize},
		// A server without Range support costs transfer (each call
		// skips the prefix) but never holds more than one chunk.
		{"no range support", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var served atomic.Int64
			sb := interceptedSandbox(t, e2bwire.EnvdPort, "/files", func(w http.ResponseWriter, r *http.Request) {
				if !tc.ranges {
					r.Header.Del("Range")
				}
				http.ServeContent(countingWriter{w, &served}, r, "f", time.Time{}, bytes.NewReader(file))
			})
			var got []byte
			var off int64
			for {
				res, err := sb.ReadFile(context.Background(), agent.ReadParams{Path: "/home/user/f", Offset: off, Limit: agent.ChunkSize})
				if err != nil {
					t.Fatal(err)
				}
				if res.Size != int64(len(file)) || len(res.Data) > agent.ChunkSize {
					t.Fatalf("at %d: size %d, %d bytes", off, res.Size, len(res.Data))
				}
				got = append(got, res.Data...)
				off += int64(len(res.Data))
				if res.EOF {
					break
				}
				if len(res.Data) == 0 {
					t.Fatal("no progress before EOF")
				}
			}
			if !bytes.Equal(got, file) {
				t.Fatalf("read %d bytes, not the file's %d", len(got), len(file))
			}
			t.Logf("served %d bytes for a %d byte file", served.Load(), len(file))
			if tc.bound > 0 && served.Load() > tc.bound {
				t.Fatalf("served %d bytes for a %d byte file", served.Load(), len(file))
			}
			// Past the end: empty, EOF, the size still known.
			res, err := sb.ReadFile(context.Background(), agent.ReadParams{Path: "/home/user/f", Offset: int64(len(file)) + 10})
			if err != nil || len(res.Data) != 0 || !res.EOF || res.Size != int64(len(file)) {
				t.Fatalf("read past the end: %+v %v", res, err)
			}
		})
	}
	t.Run("empty file", func(t *testing.T) {
		sb := interceptedSandbox(t, e2bwire.EnvdPort, "/files", func(w http.ResponseWriter, r *http.Request) {
			http.ServeContent(w, r, "f", time.Time{}, bytes.NewReader(nil))
		})
		res, err := sb.ReadFile(context.Background(), agent.ReadParams{Path: "/home/user/f"})
		if err != nil || len(res.Data) != 0 || !res.EOF || res.Size != 0 {
			t.Fatalf("empty file: %+v %v", res, err)
		}
	})
}

// The code interpreter's /execute stream is sandbox output: a line or a
// response past its bound fails the call with resource_exhausted instead
// of being buffered (lines were allowed 64 MiB, and results were kept
// without any bound).
func TestExecuteBounds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(w io.Writer)
	}{
		{"one long line", func(w io.Writer) {
			io.WriteString(w, `{"type":"stdout","text":"`+strings.Repeat("x", 20<<20)+`"}`+"\n")
		}},
		{"many results", func(w io.Writer) {
			png := strings.Repeat("A", 1<<20)
			for range 100 {
				io.WriteString(w, `{"type":"result","is_main_result":false,"png":"`+png+`"}`+"\n")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := interceptedSandbox(t, e2bwire.InterpreterPort, "/execute", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/x-ndjson")
				tc.write(w)
				io.WriteString(w, `{"type":"end_of_execution"}`+"\n")
			})
			res, err := sb.RunCode(context.Background(), agent.RunCodeParams{Language: agent.Python, Code: "x"}, nil)
			if !errors.Is(err, errdefs.ErrResourceExhausted) {
				n := 0
				if res != nil {
					n = len(res.Results)
				}
				t.Fatalf("err %v (%d results kept), want resource_exhausted", err, n)
			}
			t.Logf("%v", err)
		})
	}
}

// An envd that answers a Connect call with a huge or gzip-inflated message
// (the remote server is sandbox-controlled ground) is refused with a
// bounded read. Before, the client read any size and inflated any gzip.
func TestEnvdAnswerBounds(t *testing.T) {
	// 192 MiB: a client that reads it all holds at least that much, while
	// the bounded read holds the 32 MiB limit in a buffer that may double
	// to 64 MiB, so the 128 MiB threshold below leaves room for GC noise
	// on both sides.
	// Bytes, not a string: writing a string to the gzip writer would copy
	// it, and the copy would count against the client.
	huge := []byte(`{"entries":[{"name":"` + strings.Repeat("a", 192<<20) + `"}]}`)
	for _, tc := range []struct {
		name  string
		write func(w http.ResponseWriter)
	}{
		{"plain", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(huge)
		}},
		{"gzip", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			zw.Write(huge)
			zw.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := interceptedSandbox(t, e2bwire.EnvdPort, "/filesystem.Filesystem/ListDir", func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				tc.write(w)
			})
			var err error
			grew := e2bcompattest.PeakRSSGrowth(t, func() {
				_, err = sb.List(context.Background(), agent.ListParams{Path: "/home/user"})
			})
			t.Logf("%v; peak RSS growth %d MiB", err, grew>>20)
			if err == nil {
				t.Fatal("a 192 MiB listing was accepted")
			}
			if grew > 128<<20 {
				t.Fatalf("peak RSS grew by %d MiB", grew>>20)
			}
		})
	}
}
