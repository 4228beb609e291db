package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/errdefs"
)

var frameSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"x","data":{"category":"not_found"}}}`,
	`{"jsonrpc":"2.0","method":"output","params":{"ref":1,"stream":"stdout","data":"hi"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":""}}`,
	`{"jsonrpc":"2.0","id":18446744073709551615,"result":null}`,
	`{"jsonrpc":"1.0","id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":-1,"result":{}}`,
	`{"jsonrpc":"2.0","method":"output","params":{"ref":1,"stream":"result","result":{"png":"iVBOR"}}}`,
	`[1,2,3]`,
	`null`,
	"\xff\xfe{",
	`{"jsonrpc":"2.0","id":1,"method":"exec","params":{}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"version":"1"},"id":2}`,
	`{"jsonrpc":"2.0","id":1,"result":{"version":7}}`,
	`{"jsonrpc":"2.0","id":99999999999999999999,"result":{}}`,
	`{"jsonrpc":"2.0","method":"output","params":{"ref":1,"stream":"stdout","data":"hi"},"id":1}`,
}

// FuzzDecodeFrame feeds arbitrary bytes through the host-side frame reader
// and decoder: it must never panic, never return an oversized frame, and
// every frame it accepts must have a valid shape.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range frameSeeds {
		f.Add([]byte(s + "\n"))
	}
	f.Add([]byte(strings.Repeat("a", 300) + "\n" + frameSeeds[0] + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const max = 256
		fr := newFrameReader(bytes.NewReader(data), max)
		for {
			line, err := fr.next()
			if err != nil {
				break
			}
			if len(line) > max {
				t.Fatalf("frame of %d bytes passed a %d-byte limit", len(line), max)
			}
			fm, err := DecodeFrame(line)
			if err != nil {
				continue
			}
			if fm.JSONRPC != "2.0" {
				t.Fatalf("accepted jsonrpc %q", fm.JSONRPC)
			}
			if (fm.ID == nil) == (fm.Method == "") {
				t.Fatalf("accepted frame that is neither response nor notification: %q", line)
			}
		}
		// The same bytes thrown at a live client: it must not panic, and
		// it must end up either answering the call or closing.
		fuzzClient(t, data)
	})
}

func fuzzClient(t *testing.T, data []byte) {
	host, agentSide := net.Pipe()
	c := NewClient(host, ClientConfig{SandboxID: "fuzz", Logger: discardLogger()})
	defer c.Close()
	go func() {
		// Drain requests so the client's writes never block.
		buf := make([]byte, 4096)
		for {
			if _, err := agentSide.Read(buf); err != nil {
				return
			}
		}
	}()
	go func() {
		_, _ = agentSide.Write(data)
		_ = agentSide.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.Ping(ctx)
	if err != nil && !errors.Is(err, errdefs.ErrUnavailable) && !errdefs.IsClientFault(err) && !errors.Is(err, errdefs.ErrInternal) {
		t.Fatalf("unexpected error class: %v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("client hung on hostile input")
	}
}

// runCodeResponse is a warm python 1+1 answer as the agent writes it.
const runCodeResponse = `{"jsonrpc":"2.0","id":12345,"result":{"success":true,"stdout":"","stderr":"","results":[{"text":"2","isMainResult":true}],"executionCount":7,"durationMs":0}}`

// BenchmarkDecodeResponse compares the general path (DecodeFrame, then the
// result decoded from the raw bytes) with the one-pass path the client
// takes for the agent's own layout.
func BenchmarkDecodeResponse(b *testing.B) {
	line := []byte(runCodeResponse)
	b.Run("general", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			f, err := DecodeFrame(line)
			if err != nil {
				b.Fatal(err)
			}
			var r RunCodeResult
			if err := json.Unmarshal(f.Result, &r); err != nil || !r.Success {
				b.Fatal(err)
			}
		}
	})
	b.Run("onepass", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			id, ok := resultHead(line)
			if !ok || id != 12345 {
				b.Fatal("head")
			}
			var r RunCodeResult
			rf := resultFrame{Result: &r}
			if err := json.Unmarshal(line, &rf); err != nil || !r.Success || *rf.ID != id {
				b.Fatal(err)
			}
		}
	})
}
