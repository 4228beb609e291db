package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// Output formats of -o (--output). The default is a table for people.
const (
	formatJSON = "json"
	formatYAML = "yaml"
	formatWide = "wide"
)

// output is the -o/--output flag, and --json (the same as -o json), of
// every command that prints: json and yaml print the command's value for
// scripts, wide a table with more columns, nothing the table. In json and
// yaml an error is printed as JSON on stderr too (Main).
type output struct {
	format outputFormat
	asJSON bool
}

// outputFormat is -o's value; Set refuses anything but the three formats,
// so a typo is a usage error before the command runs.
type outputFormat string

func (f *outputFormat) String() string { return string(*f) }
func (f *outputFormat) Type() string   { return "json|yaml|wide" }
func (f *outputFormat) Set(v string) error {
	if !slices.Contains([]string{formatJSON, formatYAML, formatWide}, v) {
		return fmt.Errorf("-o %q: the formats are json, yaml and wide", v)
	}
	*f = outputFormat(v)
	return nil
}

// annotOutput marks a command that takes -o.
const annotOutput = "sandlot:output"

// register adds -o and --json to cmd.
func (o *output) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.VarP(&o.format, "output", "o", "output format: json, yaml or wide (default: a table or text for people)")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON for scripts (the same as -o json)")
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotOutput] = "true"
}

// mode is the format asked for: json, yaml, wide or "".
func (o output) mode() string {
	if o.asJSON {
		return formatJSON
	}
	return string(o.format)
}

// structured reports whether the command prints its value (json, yaml)
// rather than text for people.
func (o output) structured() bool { return o.mode() == formatJSON || o.mode() == formatYAML }

// wide reports whether a table gets its wide columns.
func (o output) wide() bool { return o.mode() == formatWide }

// print writes v as JSON or YAML.
func (o output) print(w io.Writer, v any) error {
	if o.mode() == formatYAML {
		return printYAML(w, v)
	}
	return printJSON(w, v)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printYAML writes v as YAML with the keys and names of its JSON (the wire
// types' tags), in block style.
func printYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return err
	}
	blockStyle(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// blockStyle drops the styles YAML keeps from JSON (flow braces, quoted
// keys and strings): the encoder quotes what needs it.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// structuredArgs reports whether a command line asks for json or yaml,
// for an error met before its flags were parsed.
func structuredArgs(args []string) bool {
	for i, a := range args {
		if a == "--" {
			return false
		}
		a = strings.TrimPrefix(a, "-")
		switch {
		case a == "json", a == "-json":
			return true
		case a == "o" || a == "-output":
			if i+1 < len(args) && (args[i+1] == formatJSON || args[i+1] == formatYAML) {
				return true
			}
		case a == "o"+formatJSON, a == "o"+formatYAML, a == "o="+formatJSON, a == "o="+formatYAML,
			a == "-output="+formatJSON, a == "-output="+formatYAML, a == "output="+formatJSON, a == "output="+formatYAML:
			return true
		}
	}
	return false
}

// structuredCmd reports whether cmd was told to print json or yaml.
func structuredCmd(cmd *cobra.Command) bool {
	if cmd == nil {
		return false
	}
	if f := cmd.Flags().Lookup("json"); f != nil && f.Changed && f.Value.String() == "true" {
		return true
	}
	if f := cmd.Flags().Lookup("output"); f != nil && f.Changed {
		return f.Value.String() == formatJSON || f.Value.String() == formatYAML
	}
	return false
}

var _ flag.Value = (*outputFormat)(nil)
