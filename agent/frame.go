package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

var errFrameTooLarge = errors.New("frame too large")

// frameReader splits a stream into "\n"-terminated frames of at most max
// bytes, without ever buffering more than max+bufio size.
type frameReader struct {
	r   *bufio.Reader
	max int
	buf []byte
	// partial: buf holds the start of a frame whose read a deadline
	// interrupted (the Client's callers read with one: clientwait.go);
	// the next call goes on with it.
	partial bool
}

func newFrameReader(r io.Reader, max int) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next frame without its newline. The slice is valid until
// the following call. A frame longer than max fails with errFrameTooLarge.
// A read deadline that passes mid-frame (os.ErrDeadlineExceeded) loses
// nothing: the bytes read so far are kept for the next call.
func (fr *frameReader) next() ([]byte, error) {
	line, err := fr.r.ReadSlice('\n')
	if err == nil && !fr.partial {
		if len(line)-1 > fr.max {
			return nil, errFrameTooLarge
		}
		return line[:len(line)-1], nil
	}
	if !fr.partial {
		fr.buf = fr.buf[:0]
	}
	for {
		fr.buf = append(fr.buf, line...)
		switch {
		case err == nil:
			fr.partial = false
			if len(fr.buf)-1 > fr.max {
				return nil, errFrameTooLarge
			}
			out := fr.buf[:len(fr.buf)-1]
			if cap(fr.buf) > 1<<20 {
				fr.buf = nil // don't pin a huge buffer after one big frame
			}
			return out, nil
		case !errors.Is(err, bufio.ErrBufferFull) && !errors.Is(err, os.ErrDeadlineExceeded):
			fr.partial = false
			return nil, err
		case len(fr.buf) > fr.max:
			return nil, errFrameTooLarge
		case errors.Is(err, os.ErrDeadlineExceeded):
			fr.partial = len(fr.buf) > 0
			return nil, err
		}
		line, err = fr.r.ReadSlice('\n')
	}
}

// DecodeFrame parses one frame received by the host and checks its shape:
// a response has an id, no method, and exactly one of result and error; a
// notification has a method and no id. Anything else is an error, and the
// caller must treat the connection as broken.
func DecodeFrame(line []byte) (*Frame, error) {
	line = bytes.TrimRight(line, "\r")
	var f Frame
	if err := json.Unmarshal(line, &f); err != nil {
		return nil, fmt.Errorf("bad frame: %v", err)
	}
	if f.JSONRPC != "2.0" {
		return nil, fmt.Errorf("bad frame: jsonrpc %q", f.JSONRPC)
	}
	hasResult := len(f.Result) > 0
	switch {
	case f.ID != nil && f.Method == "":
		if hasResult == (f.Error != nil) {
			return nil, errors.New("bad frame: response needs exactly one of result and error")
		}
	case f.ID == nil && f.Method != "":
		if hasResult || f.Error != nil {
			return nil, errors.New("bad frame: notification with result or error")
		}
	default:
		return nil, errors.New("bad frame: neither a response nor a notification")
	}
	return &f, nil
}
