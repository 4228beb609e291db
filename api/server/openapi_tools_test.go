package server

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/tools"
)

var update = flag.Bool("update", false, "rewrite api/openapi.json's tool operations from the tool registry")

// toolResults is the Go type of each tool's result. Every tool of the
// registry has one (TestOpenAPITools fails on a tool without), so a new
// tool cannot be left out of the document.
var toolResults = map[string]any{
	"run_code":        api.RunCodeResult{},
	"run_analysis":    tools.AnalysisResult{},
	"bash":            tools.BashResult{},
	"read_file":       tools.ReadFileResult{},
	"write_file":      tools.WriteFileResult{},
	"edit_file":       tools.EditFileResult{},
	"list_files":      tools.ListFilesResult{},
	"glob":            tools.GlobResult{},
	"grep":            tools.GrepResult{},
	"suspend_sandbox": tools.SuspendSandboxResult{},
	"fork_sandbox":    tools.ForkSandboxResult{},
}

// codeTools answer a failure of the call (a context limit, a lost
// sandbox) in their own result type; the other tools answer it as a
// tools.FailureResult (tools/failure.go).
var codeTools = map[string]bool{"run_code": true, "run_analysis": true, "bash": true}

// pascal turns run_code into RunCode.
func pascal(name string) string {
	var b strings.Builder
	for _, part := range strings.Split(name, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

func ref(name string) *ordered { return obj("$ref", "#/components/schemas/"+name) }

// generateToolsOpenAPI rewrites doc's tool operations from the registry:
// one POST /v1/tools/<tool> per tool, typed by the tool's own JSON Schema
// (its arguments, <Tool>Args, exactly as the registry enforces it) and by
// a schema of its Go result type (<Tool>Result, by reflection), plus the
// typed events of a streamed call. Everything else in doc is hand-written
// and left as it is, except that the schemas of result types are
// regenerated (keeping the descriptions and enums written into them).
func generateToolsOpenAPI(doc *ordered, reg *tools.Registry) error {
	paths := doc.get("paths").(*ordered)
	schemas := doc.get("components").(*ordered).get("schemas").(*ordered)
	generic, ok := paths.get("/v1/tools/{name}").(*ordered)
	if !ok {
		return fmt.Errorf("no /v1/tools/{name} in the document")
	}
	genericPost := generic.get("post").(*ordered)
	toolRequest := schemas.get("ToolRequest").(*ordered)

	// The paths: the generic route, then one per tool in the registry's
	// order, then the rest as they were.
	newPaths := &ordered{vals: map[string]any{}}
	for _, k := range paths.keys {
		if strings.HasPrefix(k, "/v1/tools/") && k != "/v1/tools/{name}" {
			continue // regenerated below
		}
		newPaths.set(k, paths.get(k))
		if k != "/v1/tools/{name}" {
			continue
		}
		for _, t := range reg.Tools() {
			if _, ok := toolResults[t.Name]; !ok {
				continue // desktop tools: only with a desktop template; the generic route serves them
			}
			newPaths.set("/v1/tools/"+t.Name, obj("post", toolOperation(t, genericPost)))
		}
	}
	doc.set("paths", newPaths)

	// The schemas.
	gen := &schemaGen{old: schemas, out: map[string]*ordered{}}
	for _, e := range streamEvents() {
		schemas.set(e.name, e.schema)
	}
	for _, t := range reg.Tools() {
		rt, ok := toolResults[t.Name]
		if !ok {
			continue
		}
		p := pascal(t.Name)
		args, err := rawOrdered(t.InputSchema)
		if err != nil {
			return fmt.Errorf("%s: %v", t.Name, err)
		}
		args.del("$schema")
		schemas.set(p+"Args", args)
		req := &ordered{vals: map[string]any{}}
		req.set("type", "object")
		req.set("additionalProperties", false)
		if reqd, ok := args.get("required").([]any); ok && len(reqd) > 0 {
			req.set("required", []any{"args"})
		}
		props := &ordered{vals: map[string]any{}}
		for _, k := range toolRequest.get("properties").(*ordered).keys {
			v := toolRequest.get("properties").(*ordered).get(k)
			if k == "args" {
				v = ref(p + "Args")
			}
			props.set(k, v)
		}
		req.set("properties", props)
		schemas.set(p+"Request", req)
		gen.named(p+"Result", reflect.TypeOf(rt))
		schemas.set(p+"StreamEvent", obj(
			"description", "One NDJSON line of a streamed "+t.Name+" call: output as it happens, then its final result (or an error).",
			"oneOf", []any{ref("StdoutEvent"), ref("StderrEvent"), ref("RichResultEvent"), ref("ErrorEvent"), obj(
				"type", "object",
				"required", []any{"type", "result"},
				"properties", obj(
					"type", obj("const", api.EventFinal),
					"result", resultSchema(t.Name),
				),
			)},
			"discriminator", obj("propertyName", "type"),
		))
	}
	gen.named("FailureResult", reflect.TypeOf(tools.FailureResult{}))
	for _, name := range gen.order {
		schemas.set(name, gen.out[name])
	}
	return nil
}

// resultSchema is what a tool answers with 200.
func resultSchema(tool string) *ordered {
	p := pascal(tool)
	if codeTools[tool] {
		return ref(p + "Result")
	}
	return obj("oneOf", []any{ref(p + "Result"), ref("FailureResult")})
}

// toolOperation is POST /v1/tools/<tool> (operation toolRunCode, apart
// from the other routes' ids such as listFiles): the generic route's parameters
// (but the tool's name) and error responses, with the tool's own body and
// result.
func toolOperation(t tools.Tool, generic *ordered) *ordered {
	p := pascal(t.Name)
	var params []any
	for _, prm := range generic.get("parameters").([]any) {
		if prm.(*ordered).get("name") == "name" {
			continue
		}
		params = append(params, prm)
	}
	op := obj(
		"operationId", "tool"+pascal(t.Name),
		"summary", "Call the "+t.Name+" tool",
		"description", t.Description+" (Model-facing description; generated from the tool registry. A failure of the code itself, a context limit or a lost sandbox is a 200 result with success false, which a model can read.)",
		"tags", []any{"tools"},
		"security", generic.get("security"),
		"parameters", params,
		"requestBody", obj("required", true, "content", obj(api.ContentTypeJSON, obj("schema", ref(p+"Request")))),
	)
	responses := &ordered{vals: map[string]any{}}
	responses.set("200", obj(
		"description", "The tool's result, with the call's conversationId and pathId (and userId).",
		"content", obj(
			api.ContentTypeJSON, obj("schema", resultSchema(t.Name)),
			api.ContentTypeNDJSON, obj("schema", ref(p+"StreamEvent")),
		),
	))
	gr := generic.get("responses").(*ordered)
	for _, code := range gr.keys {
		if code != "200" {
			responses.set(code, gr.get(code))
		}
	}
	op.set("responses", responses)
	return op
}

type namedSchema struct {
	name   string
	schema *ordered
}

// streamEvents are the typed lines of a streamed tool call (api.Event by
// its type); each tool's <Tool>StreamEvent adds its final line.
func streamEvents() []namedSchema {
	str := obj("type", "string")
	return []namedSchema{
		{"StdoutEvent", obj("type", "object", "description", "Output the code wrote to stdout, guarded, as it happened.",
			"required", []any{"type", "data"}, "properties", obj("type", obj("const", api.EventStdout), "data", str))},
		{"StderrEvent", obj("type", "object", "description", "Output the code wrote to stderr, guarded, as it happened.",
			"required", []any{"type", "data"}, "properties", obj("type", obj("const", api.EventStderr), "data", str))},
		{"RichResultEvent", obj("type", "object", "description", "A rich result (a figure, a displayed value) as it happened.",
			"required", []any{"type", "result"}, "properties", obj("type", obj("const", api.EventResult), "result", ref("RichResult")))},
		{"ErrorEvent", obj("type", "object", "description", "The call failed after streaming began; the last line.",
			"required", []any{"type", "code", "message"}, "properties", obj("type", obj("const", api.EventError),
				"code", obj("type", "string", "description", "The error category (as Error.code)."), "message", str))},
	}
}

// schemaGen makes JSON Schemas of Go result types by reflection: a struct
// is an object of its JSON fields (embedded structs inlined), a field
// without omitempty or omitzero is required, a pointer without omitempty
// may be null, and named struct types are components of their own. What
// a person wrote into the old schema of the same name (descriptions, an
// enum) is kept when the field keeps its type.
type schemaGen struct {
	old   *ordered
	out   map[string]*ordered
	order []string
}

var (
	rawType  = reflect.TypeOf(json.RawMessage(nil))
	timeType = reflect.TypeOf(time.Time{})
)

func (g *schemaGen) named(name string, t reflect.Type) {
	if _, done := g.out[name]; done {
		return
	}
	s := obj("type", "object")
	g.out[name] = s
	g.order = append(g.order, name)
	old, _ := g.old.get(name).(*ordered)
	if old != nil && old.get("description") != nil {
		s.set("description", old.get("description"))
	}
	props := &ordered{vals: map[string]any{}}
	var required []any
	g.fields(t, props, &required)
	if old != nil {
		if op, ok := old.get("properties").(*ordered); ok {
			for _, k := range props.keys {
				keepWritten(props.get(k).(*ordered), op.get(k))
			}
		}
	}
	if len(required) > 0 {
		s.set("required", required)
	}
	s.set("properties", props)
}

// keepWritten carries a hand-written description and enum over to a
// generated property of the same type.
func keepWritten(gen *ordered, old any) {
	o, ok := old.(*ordered)
	if !ok || gen.get("type") != nil && o.get("type") != gen.get("type") {
		return
	}
	for _, k := range []string{"description", "enum"} {
		if v := o.get(k); v != nil {
			gen.set(k, v)
		}
	}
}

func (g *schemaGen) fields(t reflect.Type, props *ordered, required *[]any) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			g.fields(f.Type, props, required)
			continue
		}
		if name == "" {
			name = f.Name
		}
		optional := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		s := g.typeSchema(f.Type)
		if f.Type.Kind() == reflect.Pointer && !optional {
			s = obj("anyOf", []any{s, obj("type", "null")})
		}
		if name == "outputType" {
			s.set("enum", []any{"json", "table", "text", "error"})
		}
		props.set(name, s)
		if !optional {
			*required = append(*required, name)
		}
	}
}

func (g *schemaGen) typeSchema(t reflect.Type) *ordered {
	if t == rawType {
		return obj()
	}
	if t == timeType {
		return obj("type", "string", "format", "date-time")
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.typeSchema(t.Elem())
	case reflect.String:
		return obj("type", "string")
	case reflect.Bool:
		return obj("type", "boolean")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return obj("type", "integer")
	case reflect.Float32, reflect.Float64:
		return obj("type", "number")
	case reflect.Slice, reflect.Array:
		return obj("type", "array", "items", g.typeSchema(t.Elem()))
	case reflect.Map:
		return obj("type", "object", "additionalProperties", g.typeSchema(t.Elem()))
	case reflect.Interface:
		return obj()
	case reflect.Struct:
		g.named(t.Name(), t)
		return ref(t.Name())
	}
	panic(fmt.Sprintf("openapi: no schema for Go type %s", t))
}

// openAPIRegistry is the registry the document describes: the daemon's
// defaults (the code size limit, TTL and rotation its descriptions state).
func openAPIRegistry() *tools.Registry { return tools.New(nil, tools.Config{}) }

// TestOpenAPITools: the document's tool operations are what the tool
// registry generates (one typed operation per tool, its arguments the
// schema the registry enforces, its result the schema of its Go type).
// `go generate ./api/server` (go test -run TestOpenAPITools -update)
// rewrites them after a change to a tool.
func TestOpenAPITools(t *testing.T) {
	reg := openAPIRegistry()
	for _, tool := range reg.Tools() {
		if _, ok := toolResults[tool.Name]; !ok && !strings.HasPrefix(tool.Name, "desktop_") {
			t.Errorf("tool %s has no result type in toolResults: the document would not type it", tool.Name)
		}
	}
	v, err := decodeOrdered(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	doc := v.(*ordered)
	if err := generateToolsOpenAPI(doc, reg); err != nil {
		t.Fatal(err)
	}
	want, err := encodeOrdered(doc)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("../openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(want, api.OpenAPI) {
		t.Errorf("api/openapi.json's tool operations differ from the registry's; run go generate ./api/server:\n%s",
			cmp.Diff(strings.Split(string(api.OpenAPI), "\n"), strings.Split(string(want), "\n")))
	}
}

// TestOpenAPIToolArgs reads the committed document as a client does and
// checks each tool's argument schema against the one the registry
// enforces, property by property: what a generated client type-checks is
// what the server accepts.
func TestOpenAPIToolArgs(t *testing.T) {
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	var tools []string
	for _, tool := range openAPIRegistry().Tools() {
		if _, ok := toolResults[tool.Name]; !ok {
			continue
		}
		tools = append(tools, tool.Name)
		t.Run(tool.Name, func(t *testing.T) {
			if _, ok := doc.Paths["/v1/tools/"+tool.Name]["post"]; !ok {
				t.Fatalf("no POST /v1/tools/%s", tool.Name)
			}
			var want, got map[string]any
			if err := json.Unmarshal(tool.InputSchema, &want); err != nil {
				t.Fatal(err)
			}
			delete(want, "$schema")
			if err := json.Unmarshal(doc.Components.Schemas[pascal(tool.Name)+"Args"], &got); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%sArgs differs from the registry's schema (-registry +document):\n%s", pascal(tool.Name), d)
			}
		})
	}
	ids := map[string]string{}
	for p, ops := range doc.Paths {
		for m, raw := range ops {
			var op struct {
				OperationID string `json:"operationId"`
			}
			if json.Unmarshal(raw, &op) != nil || op.OperationID == "" {
				continue
			}
			if other, dup := ids[op.OperationID]; dup {
				t.Errorf("operationId %s of %s %s is also %s's: generated clients need them unique", op.OperationID, m, p, other)
			}
			ids[op.OperationID] = m + " " + p
		}
	}
	var documented []string
	for p := range doc.Paths {
		if name, ok := strings.CutPrefix(p, "/v1/tools/"); ok && name != "{name}" {
			documented = append(documented, name)
		}
	}
	slices.Sort(documented)
	slices.Sort(tools)
	if d := cmp.Diff(tools, documented); d != "" {
		t.Errorf("tool operations (-registry +document):\n%s", d)
	}
}
