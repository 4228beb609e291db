package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sandlot/sandlot/client"
)

func init() {
	commands["ctx"] = command{summary: "list, show and terminate execution contexts (ls, get, rm)", usage: ctxUsage,
		verbs: []string{"ls", "get", "rm"}, run: runCtx}
}

const ctxUsage = `usage: sandlot ctx ls|get|rm [flags] [ID...]

  ls        list contexts (--conversation, --path, --status, --limit, --after)
  get ID    show one context
  rm ID...  terminate contexts

` + "`sandlot ctx VERB --help` shows a verb's flags.\n"

func runCtx(ctx context.Context, args []string, std IO) error {
	if len(args) == 0 {
		io.WriteString(std.Err, ctxUsage)
		return usageErr("ctx: missing subcommand")
	}
	verb := args[0]
	fs := newFlags("ctx "+verb, std)
	var r remote
	r.register(fs)
	switch verb {
	case "ls", "list":
		conv := fs.String("conversation", "", "only this conversation")
		path := fs.String("path", "", "only this path")
		status := fs.String("status", "active", "comma-separated: creating, ready, terminated, error, active; empty for all")
		limit := fs.Int("limit", 100, "page size")
		after := fs.String("after", "", "paging cursor")
		if err := parseInterleaved(fs, args[1:]); err != nil {
			return err
		}
		var st []string
		if *status != "" {
			st = strings.Split(*status, ",")
		}
		l, err := r.client().ListContexts(ctx, client.ListOptions{ConversationID: *conv, PathID: *path, Status: st, Limit: *limit, After: *after})
		if err != nil {
			return err
		}
		if r.json {
			return printJSON(std.Out, l)
		}
		rows := make([][]string, 0, len(l.Contexts))
		for _, c := range l.Contexts {
			rows = append(rows, []string{c.ID, c.ConversationID, c.PathID, c.Status, fmt.Sprint(c.ExecutionCount), ago(c.LastUsedAt), c.SandboxID})
		}
		if err := table(std.Out, []string{"ID", "CONVERSATION", "PATH", "STATUS", "EXECS", "LAST USED", "SANDBOX"}, rows); err != nil {
			return err
		}
		if l.Next != "" {
			fmt.Fprintf(std.Err, "more: --after %s\n", l.Next)
		}
		return nil
	case "get", "show":
		if err := parseInterleaved(fs, args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return usageErr("ctx get: give one context id")
		}
		rec, err := r.client().GetContext(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		if r.json {
			return printJSON(std.Out, rec)
		}
		rows := [][]string{
			{"id", rec.ID}, {"tenant", rec.TenantID}, {"conversation", rec.ConversationID}, {"path", rec.PathID},
			{"status", rec.Status}, {"reason", rec.TerminationReason}, {"sandbox", rec.SandboxID},
			{"provider", rec.Provider}, {"template", rec.Template},
			{"created", rec.CreatedAt.Format(time.RFC3339)}, {"last used", rec.LastUsedAt.Format(time.RFC3339)},
			{"expires", rec.ExpiresAt.Format(time.RFC3339)},
			{"executions", fmt.Sprint(rec.ExecutionCount)}, {"execution time", (time.Duration(rec.TotalExecutionTimeMs) * time.Millisecond).String()},
		}
		if rec.LastError != "" {
			rows = append(rows, []string{"last error", rec.LastError})
		}
		return table(std.Out, []string{"FIELD", "VALUE"}, rows)
	case "rm", "delete", "terminate":
		if err := parseInterleaved(fs, args[1:]); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			return usageErr("ctx rm: give context ids")
		}
		c := r.client()
		for _, id := range fs.Args() {
			if err := c.DeleteContext(ctx, id); err != nil {
				return err
			}
			if !r.json {
				fmt.Fprintf(std.Out, "terminated %s\n", id)
			}
		}
		return nil
	}
	return usageErr("ctx: unknown subcommand %q (ls, get, rm)", verb)
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String() + " ago"
}
