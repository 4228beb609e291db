package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// ordered is a JSON object that keeps its keys' order, so that rewriting
// api/openapi.json changes only what the generator owns (the tool
// operations) and leaves the hand-written rest where it was.
type ordered struct {
	keys []string
	vals map[string]any
}

// obj builds an ordered object from key, value pairs.
func obj(kv ...any) *ordered {
	o := &ordered{vals: map[string]any{}}
	for i := 0; i+1 < len(kv); i += 2 {
		o.set(kv[i].(string), kv[i+1])
	}
	return o
}

func (o *ordered) get(k string) any { return o.vals[k] }

func (o *ordered) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *ordered) del(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	for i, key := range o.keys {
		if key == k {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			return
		}
	}
}

// decodeOrdered parses one JSON document into *ordered, []any, string,
// json.Number, bool and nil.
func decodeOrdered(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the document")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &ordered{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				o.set(kt.(string), v)
			}
			_, err := dec.Token()
			return o, err
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token()
			return a, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}

// encodeOrdered writes v as the document's style has it: two spaces of
// indent, no HTML escaping, a final newline.
func encodeOrdered(v any) ([]byte, error) {
	var compact bytes.Buffer
	if err := writeValue(&compact, v); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func writeValue(buf *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case *ordered:
		buf.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeValue(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeValue(buf, t.vals[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeValue(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case []string:
		a := make([]any, len(t))
		for i, s := range t {
			a[i] = s
		}
		return writeValue(buf, a)
	default:
		enc := json.NewEncoder(buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(t); err != nil {
			return err
		}
		buf.Truncate(len(bytes.TrimRight(buf.Bytes(), "\n")))
	}
	return nil
}

// toOrdered converts a value decoded by encoding/json (map[string]any)
// into ordered form with sorted keys; a raw JSON schema keeps its own
// order through decodeOrdered instead.
func rawOrdered(raw json.RawMessage) (*ordered, error) {
	v, err := decodeOrdered(raw)
	if err != nil {
		return nil, err
	}
	o, ok := v.(*ordered)
	if !ok {
		return nil, fmt.Errorf("not an object: %.40s", strings.TrimSpace(string(raw)))
	}
	return o, nil
}
