package tools

import (
	"encoding/json"
	"fmt"

	"github.com/sandlot/sandlot/errdefs"
)

// Export formats.
const (
	FormatOpenAI    = "openai"
	FormatAnthropic = "anthropic"
	FormatMCP       = "mcp"
)

// Formats lists the export formats.
var Formats = []string{FormatOpenAI, FormatAnthropic, FormatMCP}

// OpenAITool is one tool in OpenAI function-calling form.
type OpenAITool struct {
	Type     string         `json:"type"` // "function"
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction is the function of an OpenAITool.
type OpenAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// AnthropicTool is one tool in Anthropic tool-use form.
type AnthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// MCPTool is one tool as MCP's tools/list returns it.
type MCPTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// Export returns the tools in format: []Tool (the registry's own, format
// ""), []OpenAITool, []AnthropicTool or []MCPTool, sorted by name. OpenAI and Anthropic get the schema without
// its "$schema" key, which their validators do not need; MCP keeps it
// (2020-12 is MCP's default dialect anyway). An unknown format is
// ErrInvalidArgument.
func (r *Registry) Export(format string) (any, error) {
	return r.ExportFor(format, "")
}

// ExportFor is Export of the tools offered to request (ToolsFor): without
// the code tools while they are withdrawn from it.
func (r *Registry) ExportFor(format, request string) (any, error) {
	tools := r.ToolsFor(request)
	switch format {
	case "":
		return tools, nil
	case FormatOpenAI:
		out := make([]OpenAITool, 0, len(tools))
		for _, t := range tools {
			out = append(out, OpenAITool{Type: "function", Function: OpenAIFunction{Name: t.Name, Description: t.Description, Parameters: withoutDialect(t.InputSchema)}})
		}
		return out, nil
	case FormatAnthropic:
		out := make([]AnthropicTool, 0, len(tools))
		for _, t := range tools {
			out = append(out, AnthropicTool{Name: t.Name, Description: t.Description, InputSchema: withoutDialect(t.InputSchema)})
		}
		return out, nil
	case FormatMCP:
		out := make([]MCPTool, 0, len(tools))
		for _, t := range tools {
			out = append(out, MCPTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
		}
		return out, nil
	}
	return nil, fmt.Errorf("export format %q: must be one of openai, anthropic, mcp: %w", format, errdefs.ErrInvalidArgument)
}

func withoutDialect(s json.RawMessage) json.RawMessage {
	var m map[string]any
	if err := json.Unmarshal(s, &m); err != nil {
		return s
	}
	delete(m, "$schema")
	b, err := json.Marshal(m)
	if err != nil {
		return s
	}
	return b
}
