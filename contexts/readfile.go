package contexts

import (
	"context"

	"github.com/sandlot/sandlot/agent"
)

// FileChunk is what ReadFile hands on after each read.
type FileChunk struct {
	// Data is what may be emitted now; it may be empty while the guard
	// holds a tail back.
	Data []byte
	// Size is the file's size in the sandbox as this read saw it.
	Size int64
	// EOF marks the last chunk.
	EOF bool
}

// ReadFile reads the file at path from sb and hands fn its bytes as they
// may leave the sandbox. Every edge that returns a file's contents reads
// through it: the HTTP download, E2B GET /files, and the read_file tool
// (and so MCP).
//
// It reads chunks of at most agent.ChunkSize at increasing offsets of the
// file, counted in the sandbox's bytes and never in the redacted output's.
// When sb is the guarded sandbox Manager.Use hands out, the raw chunks go
// through one Guard.File redactor for the whole file, so a value split
// across two chunks is still caught; memory stays bounded by one chunk and
// the redactor's tail whatever the file's size. It lives here, beside the
// guarded sandbox, because only that wrapper holds both the raw sandbox
// and the tenant's guard: a reader elsewhere would need a way around the
// guard to see raw chunks.
//
// fn is called at least once, and the last call has EOF set. An error
// from fn ends the read and is returned; what the redactor held back is
// dropped, never emitted unscanned. A read error (guarded like any other)
// is returned as is.
func ReadFile(ctx context.Context, sb Sandbox, path string, fn func(FileChunk) error) error {
	raw := sb
	var red FileRedactor
	errf := func(err error) error { return err }
	if gs, ok := sb.(*guardedSandbox); ok {
		raw, red = gs.sb, gs.g.File(gs.gctx(ctx), gs.tenant)
		errf = func(err error) error { return gs.err(ctx, err) }
	}
	var off int64
	for {
		res, err := raw.ReadFile(ctx, agent.ReadParams{Path: path, Offset: off, Limit: agent.ChunkSize})
		if err != nil {
			return errf(err)
		}
		off += int64(len(res.Data))
		end := res.EOF || len(res.Data) == 0
		data := res.Data
		if red != nil {
			data = red.Write(data)
			if end {
				data = append(data, red.Flush()...)
			}
		}
		if err := fn(FileChunk{Data: data, Size: res.Size, EOF: end}); err != nil {
			return err
		}
		if end {
			return nil
		}
	}
}
