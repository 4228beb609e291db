package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/guard"
	"github.com/sandlot/sandlot/guard/ner"
)

func init() {
	commands = append(commands, newSanitizeCmd)
}

// maxSanitize bounds what sanitize reads from stdin.
const maxSanitize = 256 << 20

// runSanitize reads stdin and writes it redacted (enforce), unchanged with
// a summary on stderr (report), or the findings as JSON (--json): type,
// offsets and confidence, never the values.
func newSanitizeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sanitize [flags] < input", Short: "redact PII and secrets from stdin (no server needed)", Args: cobra.NoArgs,
		Example: `  echo 'mail ops@example.com, key sk-proj-...' | sandlot sanitize
  sandlot sanitize --mode report < app.log > /dev/null
  sandlot sanitize -o json < app.log          # the findings (type, offsets), never the values`}
	fs := cmd.Flags()
	mode := fs.String("mode", guard.ModeEnforce, "enforce (redact), report (pass through, summary on stderr) or off")
	var o output
	o.register(cmd)
	fs.Lookup("json").Usage = "write the findings (type, start, end) as JSON instead of the text (the same as -o json)"
	fs.Lookup("output").Usage = "json or yaml: write the findings (type, start, end) instead of the text; wide: the text"
	regions := fs.String("regions", "IE,US", "default regions for phone numbers without a country code")
	model := fs.Bool("entity-model", true, "judge the names, places and organisations the entity rules leave open with the entity model, as serve does (about 0.7 s to load)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		std := ioOf(cmd)
		var rs []string
		for _, r := range strings.Split(*regions, ",") {
			if r = strings.TrimSpace(r); r != "" {
				rs = append(rs, r)
			}
		}
		// A file on the operator's own machine: the model judges every
		// window, however long it takes.
		cfg := guard.Config{Mode: *mode, Regions: rs, ModelBudget: -1}
		if *model && *mode != guard.ModeOff {
			m, err := ner.Load()
			if err != nil {
				fmt.Fprintf(std.Err, "sanitize: the entity model did not load (%v); the patterns and entity rules run alone\n", err)
			} else {
				cfg.Model = m
			}
		}
		g, err := guard.New(cfg)
		if err != nil {
			return fmt.Errorf("sanitize: %w", err)
		}
		in, err := io.ReadAll(io.LimitReader(std.In, maxSanitize+1))
		if err != nil {
			return fmt.Errorf("sanitize: read stdin: %w", err)
		}
		if len(in) > maxSanitize {
			return fmt.Errorf("sanitize: input over %d bytes: %w", maxSanitize, errdefs.ErrResourceExhausted)
		}
		out, findings := g.Redact(*mode, string(in))
		if o.structured() {
			if findings == nil {
				findings = []guard.Finding{}
			}
			return o.print(std.Out, findings)
		}
		if _, err := io.WriteString(std.Out, out); err != nil {
			return fmt.Errorf("sanitize: write: %w", err)
		}
		if *mode == guard.ModeReport && len(findings) > 0 {
			counts := map[string]int{}
			for _, f := range findings {
				counts[f.Type]++
			}
			types := make([]string, 0, len(counts))
			for t := range counts {
				types = append(types, t)
			}
			sort.Strings(types)
			parts := make([]string, len(types))
			for i, t := range types {
				parts[i] = fmt.Sprintf("%s=%d", t, counts[t])
			}
			fmt.Fprintf(std.Err, "sanitize: %d findings: %s\n", len(findings), strings.Join(parts, " "))
		}
		return nil
	}
	return cmd
}
