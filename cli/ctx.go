package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/client"
)

func init() {
	commands = append(commands, func() *cobra.Command {
		return verbGroup("ctx", "list, show and terminate execution contexts (ls, get, rm)", newCtxLs(), newCtxGet(), newCtxRm())
	})
}

func newCtxLs() *cobra.Command {
	cmd := &cobra.Command{Use: "ls", Aliases: []string{"list"}, Short: "list contexts", Args: cobra.NoArgs}
	fs := cmd.Flags()
	var r remote
	r.register(fs)
	conv := fs.String("conversation", "", "only this conversation")
	path := fs.String("path", "", "only this path")
	status := fs.String("status", "active", "comma-separated: creating, ready, terminated, error, active; empty for all")
	limit := fs.Int("limit", 100, "page size")
	after := fs.String("after", "", "paging cursor")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
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
	}
	return cmd
}

func newCtxGet() *cobra.Command {
	cmd := &cobra.Command{Use: "get ID", Aliases: []string{"show"}, Short: "show one context", Args: cobra.ExactArgs(1)}
	var r remote
	r.register(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		rec, err := r.client().GetContext(ctx, args[0])
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
	}
	return cmd
}

func newCtxRm() *cobra.Command {
	cmd := &cobra.Command{Use: "rm ID...", Aliases: []string{"delete", "terminate"}, Short: "terminate contexts", Args: cobra.MinimumNArgs(1)}
	var r remote
	r.register(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		c := r.client()
		for _, id := range args {
			if err := c.DeleteContext(ctx, id); err != nil {
				return err
			}
			if !r.json {
				fmt.Fprintf(std.Out, "terminated %s\n", id)
			}
		}
		return nil
	}
	return cmd
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
