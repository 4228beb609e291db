package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/errdefs"
)

func init() {
	commands = append(commands, func() *cobra.Command {
		cmd := verbGroup("ctx", "list, show and terminate execution contexts (ls, get, rm)", newCtxLs(), newCtxGet(), newCtxRm())
		cmd.Example = `  sandlot ctx ls
  sandlot ctx get my-conversation
  sandlot ctx rm --conversation my-conversation --path main`
		return cmd
	})
}

func newCtxLs() *cobra.Command {
	cmd := &cobra.Command{Use: "ls", Aliases: []string{"list"}, Short: "list contexts", Args: cobra.NoArgs,
		Example: `  sandlot ctx ls
  sandlot ctx ls --conversation my-conversation -o wide
  sandlot ctx ls --status "" -o json`}
	fs := cmd.Flags()
	var r remote
	r.register(cmd)
	user := fs.String("user", "", "only this end user's contexts")
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
		c, err := r.client()
		if err != nil {
			return err
		}
		l, err := c.ListContexts(ctx, client.ListOptions{UserID: *user, ConversationID: *conv, PathID: *path, Status: st, Limit: *limit, After: *after})
		if err != nil {
			return err
		}
		if r.out.structured() {
			return r.out.print(std.Out, l)
		}
		// The user column shows when a listed context has a user: a
		// tenant whose key serves no end users sees the table it did.
		users := slices.ContainsFunc(l.Contexts, func(c api.Context) bool { return c.UserID != "" })
		header := []string{"ID", "CONVERSATION", "PATH", "STATUS", "EXECS", "LAST USED", "SANDBOX"}
		if users {
			header = slices.Insert(header, 1, "USER")
		}
		if r.out.wide() {
			header = append(header, "TEMPLATE", "PROVIDER", "NODE", "CREATED", "EXPIRES")
		}
		rows := make([][]string, 0, len(l.Contexts))
		for _, c := range l.Contexts {
			row := []string{c.ID, c.ConversationID, c.PathID, c.Status, fmt.Sprint(c.ExecutionCount), ago(c.LastUsedAt), c.SandboxID}
			if users {
				row = slices.Insert(row, 1, c.UserID)
			}
			if r.out.wide() {
				row = append(row, c.Template, c.Provider, c.Node, c.CreatedAt.Format(time.RFC3339), c.ExpiresAt.Format(time.RFC3339))
			}
			rows = append(rows, row)
		}
		if err := table(std.Out, header, rows); err != nil {
			return err
		}
		if l.Next != "" {
			fmt.Fprintf(std.Err, "more: --after %s\n", l.Next)
		}
		return nil
	}
	return cmd
}

// ctxTarget is how ctx get and rm name a context: its id, or a
// conversation (and path), as a positional argument or flags.
type ctxTarget struct{ user, conv, path string }

// check refuses a command line that names no context, as cobra refuses
// a missing argument.
func (t ctxTarget) check(cmd *cobra.Command, args []string) error {
	if len(args) == 0 && t.conv == "" {
		return &usageError{err: usageErr("%s: name a context: an ID, a conversation, or --conversation", cmd.CommandPath()), path: cmd.CommandPath()}
	}
	return nil
}

func (t *ctxTarget) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&t.conv, "conversation", "", "the context of this conversation (instead of an ID)")
	cmd.Flags().StringVar(&t.path, "path", "", "with --conversation, or a conversation as the argument: its path (default main)")
	cmd.Flags().StringVar(&t.user, "user", "", "with --conversation, or a conversation as the argument: the end user whose conversation it is")
}

// resolve is the id of the context ref names: ref itself when a context
// has that id, else the active context of the conversation ref (path
// t.path, default main); with no ref, the active context of --conversation.
func (t ctxTarget) resolve(ctx context.Context, c *client.Client, ref string) (string, error) {
	conv := t.conv
	if ref != "" {
		if conv != "" {
			return "", usageErr("give an ID (or conversation) or --conversation, not both")
		}
		_, err := c.GetContext(ctx, ref)
		if err == nil {
			return ref, nil
		}
		if !errors.Is(err, errdefs.ErrNotFound) {
			return "", err
		}
		conv = ref
	}
	if conv == "" {
		return "", usageErr("name a context: an ID, a conversation, or --conversation")
	}
	path := t.path
	if path == "" {
		path = api.DefaultPathID
	}
	// The listing of a conversation holds every user's; the one of
	// t.user ("" being no user) is the conversation's context here.
	l, err := c.ListContexts(ctx, client.ListOptions{UserID: t.user, ConversationID: conv, PathID: path, Status: []string{"active"}, Limit: 1000})
	if err != nil {
		return "", err
	}
	l.Contexts = slices.DeleteFunc(l.Contexts, func(c api.Context) bool { return c.UserID != t.user })
	if len(l.Contexts) == 0 {
		if ref != "" {
			return "", errdefs.Sentence(errdefs.ErrNotFound, "no context has the id %q, and conversation %q has no active context on path %s", ref, conv, path)
		}
		return "", errdefs.Sentence(errdefs.ErrNotFound, "conversation %q has no active context on path %s", conv, path)
	}
	return l.Contexts[0].ID, nil
}

func newCtxGet() *cobra.Command {
	cmd := &cobra.Command{Use: "get [ID|CONVERSATION]", Aliases: []string{"show"}, Short: "show one context, by id or by conversation", Args: cobra.MaximumNArgs(1),
		Example: `  sandlot ctx get 461904e7-e85f-47c5-af3a-126bba2f7052
  sandlot ctx get my-conversation            # its path main
  sandlot ctx get --conversation my-conversation --path branch-b -o yaml`}
	var r remote
	r.register(cmd)
	var t ctxTarget
	t.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := t.check(cmd, args); err != nil {
			return err
		}
		ctx, std := cmd.Context(), ioOf(cmd)
		c, err := r.client()
		if err != nil {
			return err
		}
		id, err := t.resolve(ctx, c, firstArg(args))
		if err != nil {
			return err
		}
		rec, err := c.GetContext(ctx, id)
		if err != nil {
			return err
		}
		if r.out.structured() {
			return r.out.print(std.Out, rec)
		}
		rows := [][]string{
			{"id", rec.ID}, {"tenant", rec.TenantID}, {"conversation", rec.ConversationID}, {"path", rec.PathID},
			{"status", rec.Status}, {"reason", rec.TerminationReason}, {"sandbox", rec.SandboxID},
			{"provider", rec.Provider}, {"template", rec.Template},
			{"created", rec.CreatedAt.Format(time.RFC3339)}, {"last used", rec.LastUsedAt.Format(time.RFC3339)},
			{"expires", rec.ExpiresAt.Format(time.RFC3339)},
			{"executions", fmt.Sprint(rec.ExecutionCount)}, {"execution time", (time.Duration(rec.TotalExecutionTimeMs) * time.Millisecond).String()},
		}
		if rec.UserID != "" {
			rows = slices.Insert(rows, 2, []string{"user", rec.UserID})
		}
		if rec.LastError != "" {
			rows = append(rows, []string{"last error", rec.LastError})
		}
		if r.out.wide() {
			rows = append(rows, []string{"node", rec.Node})
		}
		return table(std.Out, []string{"FIELD", "VALUE"}, rows)
	}
	return cmd
}

func newCtxRm() *cobra.Command {
	cmd := &cobra.Command{Use: "rm [ID|CONVERSATION]...", Aliases: []string{"delete", "terminate"}, Short: "terminate contexts, by id or by conversation",
		Example: `  sandlot ctx rm 461904e7-e85f-47c5-af3a-126bba2f7052
  sandlot ctx rm my-conversation other-conversation
  sandlot ctx rm --conversation my-conversation --path branch-b`}
	var r remote
	r.register(cmd)
	var t ctxTarget
	t.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := t.check(cmd, args); err != nil {
			return err
		}
		ctx, std := cmd.Context(), ioOf(cmd)
		c, err := r.client()
		if err != nil {
			return err
		}
		if len(args) == 0 {
			args = []string{""} // --conversation names it
		}
		var done []string
		for _, ref := range args {
			id, err := t.resolve(ctx, c, ref)
			if err != nil {
				return err
			}
			if err := c.DeleteContext(ctx, id); err != nil {
				return err
			}
			done = append(done, id)
			if !r.out.structured() {
				fmt.Fprintf(std.Out, "terminated %s\n", id)
			}
		}
		if r.out.structured() {
			return r.out.print(std.Out, map[string][]string{"terminated": done})
		}
		return nil
	}
	return cmd
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
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
