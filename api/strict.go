package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	"github.com/sandlot/sandlot/errdefs"
)

// DecodeStrict decodes one JSON value from r into v, refusing fields v
// does not have, and says what went wrong in words a caller can act on:
// `unknown field "lang" (allowed: code, language, timeout)`, `field
// "timeout" must be a number, not a string`, `not valid JSON: ...`. Every
// error is invalid_argument; an error of r itself (a body over its limit,
// a deadline) is returned as it is. An empty input decodes as nothing
// (v unchanged); data after the value is refused.
//
// The /v1 server decodes its bodies with it and the CLI its config file,
// so a misspelt field reads the same on every edge (the tools' arguments
// say the same through their JSON Schemas).
func DecodeStrict(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return StrictError(err, v)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("not valid JSON: data after the value: %w", errdefs.ErrInvalidArgument)
	}
	return nil
}

// UnmarshalStrict is DecodeStrict of b.
func UnmarshalStrict(b []byte, v any) error { return DecodeStrict(bytes.NewReader(b), v) }

// StrictError turns an error of encoding/json decoding into v into the
// message DecodeStrict gives; an error that is not the decoder's (a
// reader's) is returned unchanged.
func StrictError(err error, v any) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Errorf("the body must be a JSON %s, not %s: %w", jsonKind(typ.Type), typ.Value, errdefs.ErrInvalidArgument)
		}
		return fmt.Errorf("field %q must be %s, not %s: %w", typ.Field, article(jsonKind(typ.Type)), article(typ.Value), errdefs.ErrInvalidArgument)
	case errors.As(err, &syntax):
		return fmt.Errorf("not valid JSON (%s at byte %d): %w", err.Error(), syntax.Offset, errdefs.ErrInvalidArgument)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("not valid JSON: it ends early: %w", errdefs.ErrInvalidArgument)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		field, _ := unquote(name)
		return UnknownField(field, AllowedFields(v))
	}
	return err
}

// UnknownField is the one message of a field the receiver does not take.
func UnknownField(name string, allowed []string) error {
	return fmt.Errorf("unknown field %q (allowed: %s): %w", name, strings.Join(allowed, ", "), errdefs.ErrInvalidArgument)
}

func unquote(s string) (string, bool) {
	var out string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return s, false
	}
	return out, true
}

// AllowedFields are the JSON names of the fields of the struct v points
// to (embedded structs' fields included), sorted.
func AllowedFields(v any) []string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == "-" {
				continue
			}
			if f.Anonymous && tag == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					walk(ft)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if tag == "" {
				tag = f.Name
			}
			names = append(names, tag)
		}
	}
	walk(t)
	sort.Strings(names)
	return names
}

// jsonKind names a Go type as the JSON value it decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "value"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string"
		}
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "value"
}

func article(kind string) string {
	switch kind {
	case "array", "object", "integer":
		return "an " + kind
	case "value":
		return "a value"
	}
	return "a " + kind
}
