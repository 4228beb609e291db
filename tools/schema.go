package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/sandlot/sandlot/errdefs"
)

// schema is the subset of JSON Schema (draft 2020-12) the tool schemas use:
// type, properties, required, additionalProperties (false, or a schema for
// the values of a map), maxProperties, enum, minimum, maximum, minLength,
// maxLength and items. Keywords outside the subset are
// kept in the exported schema but not enforced here; the tests check every
// schema file against this list, so none is silently ignored.
type schema struct {
	Type                 string             `json:"type"`
	Description          string             `json:"description"`
	Properties           map[string]*schema `json:"properties"`
	Required             []string           `json:"required"`
	AdditionalProperties *additional        `json:"additionalProperties"`
	MaxProperties        *int               `json:"maxProperties"`
	Enum                 []string           `json:"enum"`
	Minimum              *float64           `json:"minimum"`
	Maximum              *float64           `json:"maximum"`
	MinLength            *int               `json:"minLength"`
	MaxLength            *int               `json:"maxLength"`
	Items                *schema            `json:"items"`
}

// knownKeywords are the keywords schema understands (plus annotations).
var knownKeywords = map[string]bool{
	"$schema": true, "type": true, "description": true, "properties": true,
	"required": true, "additionalProperties": true, "enum": true, "minimum": true,
	"maximum": true, "minLength": true, "maxLength": true, "items": true,
	"maxProperties": true,
}

// additional is additionalProperties: a boolean, or the schema of every
// property not in properties (a map such as env).
type additional struct {
	allowed bool
	schema  *schema
}

func (a *additional) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &a.allowed); err == nil {
		return nil
	}
	a.allowed = true
	return json.Unmarshal(b, &a.schema)
}

// validate checks args (a JSON object) against s and returns the decoded
// object. Numbers are kept as json.Number so integers stay exact. Errors
// wrap errdefs.ErrInvalidArgument and name the tool and the field.
//
// also are argument names the caller's edge took out of args before (MCP's
// conversationId, pathId, taskId): an unknown field's message lists them
// among the allowed ones, as the edge's schema does.
func (s *schema) validate(tool string, args json.RawMessage, also ...string) (map[string]any, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s: arguments are not valid JSON: %v: %w", tool, err, errdefs.ErrInvalidArgument)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: arguments have trailing data: %w", tool, errdefs.ErrInvalidArgument)
	}
	if v == nil {
		v = map[string]any{}
	}
	root := s
	if len(also) > 0 {
		c := *s
		c.Properties = maps.Clone(s.Properties)
		for _, a := range also {
			if _, ok := c.Properties[a]; !ok {
				c.Properties[a] = &schema{} // any value: the edge checked it
			}
		}
		root = &c
	}
	if err := root.check(v, ""); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", tool, err, errdefs.ErrInvalidArgument)
	}
	return v.(map[string]any), nil
}

// check validates v at path (dotted, "" for the root) and returns a
// message-only error.
func (s *schema) check(v any, path string) error {
	name := path
	if name == "" {
		name = "arguments"
	}
	switch s.Type {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s must be an object", name)
		}
		if s.MaxProperties != nil && len(m) > *s.MaxProperties {
			return fmt.Errorf("%s has %d properties (at most %d)", name, len(m), *s.MaxProperties)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		// An unknown field first: {"lang": ...} is a misspelt language,
		// which "language is required" would not tell.
		for _, k := range keys {
			if _, ok := s.Properties[k]; !ok && s.AdditionalProperties != nil && !s.AdditionalProperties.allowed {
				return fmt.Errorf("unknown field %q (allowed: %s)", join(path, k), strings.Join(s.propertyNames(), ", "))
			}
		}
		for _, r := range s.Required {
			if _, ok := m[r]; !ok {
				return fmt.Errorf("%s is required", join(path, r))
			}
		}
		for _, k := range keys {
			ps, ok := s.Properties[k]
			if !ok {
				ap := s.AdditionalProperties
				if ap == nil || ap.schema == nil {
					continue
				}
				ps = ap.schema
			}
			if err := ps.check(m[k], join(path, k)); err != nil {
				return err
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s must be an array", name)
		}
		if s.Items != nil {
			for i, e := range a {
				if err := s.Items.check(e, fmt.Sprintf("%s[%d]", name, i)); err != nil {
					return err
				}
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s must be a string", name)
		}
		if len(s.Enum) > 0 && !contains(s.Enum, str) {
			return fmt.Errorf("%s must be one of %s", name, strings.Join(s.Enum, ", "))
		}
		n := utf8.RuneCountInString(str)
		if s.MinLength != nil && n < *s.MinLength {
			if *s.MinLength == 1 {
				return fmt.Errorf("%s must not be empty", name)
			}
			return fmt.Errorf("%s must be at least %d characters", name, *s.MinLength)
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			return fmt.Errorf("%s must be at most %d characters", name, *s.MaxLength)
		}
	case "integer", "number":
		num, ok := v.(json.Number)
		if !ok {
			if s.Type == "integer" {
				return fmt.Errorf("%s must be an integer", name)
			}
			return fmt.Errorf("%s must be a number", name)
		}
		f, err := num.Float64()
		if err != nil || math.IsInf(f, 0) {
			return fmt.Errorf("%s must be a finite number", name)
		}
		if s.Type == "integer" && f != math.Trunc(f) {
			return fmt.Errorf("%s must be an integer", name)
		}
		if s.Minimum != nil && f < *s.Minimum {
			return fmt.Errorf("%s must be >= %s", name, fmtNum(*s.Minimum))
		}
		if s.Maximum != nil && f > *s.Maximum {
			return fmt.Errorf("%s must be <= %s", name, fmtNum(*s.Maximum))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s must be a boolean", name)
		}
	case "":
		// any value
	default:
		return fmt.Errorf("%s: unsupported schema type %q", name, s.Type)
	}
	return nil
}

func (s *schema) propertyNames() []string {
	names := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func fmtNum(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprint(f)
}
