package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
)

func init() {
	commands = append(commands, func() *cobra.Command {
		cmd := verbGroup("snapshot", "snapshot a context's filesystem as a template; list and delete snapshots (create, ls, rm)",
			snapshotVerb("create", "create CONTEXT_ID", nil, "snapshot a context's filesystem as a template of the tenant's", cobra.ExactArgs(1),
				`  sandlot snapshot create 3f2a9c1e-... --name after-setup
  sandlot exec --template after-setup 'open("/home/user/notes.txt").read()'`),
			snapshotVerb("ls", "ls", []string{"list"}, "list the tenant's snapshots, newest first", cobra.NoArgs,
				`  sandlot snapshot ls
  sandlot snapshot ls --context 3f2a9c1e-... -o json`),
			snapshotVerb("rm", "rm ID|NAME...", []string{"delete"}, "delete snapshots", cobra.MinimumNArgs(1),
				`  sandlot snapshot rm after-setup`))
		cmd.Long = `usage: sandlot snapshot create CONTEXT_ID [--name NAME] [flags]
       sandlot snapshot ls [--context CONTEXT_ID] [flags]
       sandlot snapshot rm ID|NAME... [flags]

A snapshot is a template of the tenant's made of a context's filesystem
(what its sandbox wrote over its template), without its memory: start a
context from it with --template NAME like from any template.`
		cmd.Example = `  sandlot snapshot create 3f2a9c1e-... --name after-setup
  sandlot snapshot ls
  sandlot snapshot rm after-setup`
		return cmd
	})
}

func snapshotVerb(verb, use string, aliases []string, short string, args cobra.PositionalArgs, example string) *cobra.Command {
	cmd := &cobra.Command{Use: use, Aliases: aliases, Short: short, Args: args, Example: example}
	fs := cmd.Flags()
	var r remote
	r.register(cmd)
	var name, contextID string
	switch verb {
	case "create":
		fs.StringVar(&name, "name", "", "the snapshot template's name (default: snapshot- and random letters)")
	case "ls":
		fs.StringVar(&contextID, "context", "", "only the snapshots of this context")
	}
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		c, err := r.client()
		if err != nil {
			return err
		}
		switch verb {
		case "create":
			s, err := c.CreateSnapshot(ctx, pos[0], name)
			if err != nil {
				return err
			}
			if r.out.structured() {
				return r.out.print(std.Out, s)
			}
			return snapshotTable(std.Out, []api.Snapshot{*s})
		case "ls":
			return snapshotList(ctx, c, contextID, std.Out, r.out)
		default: // rm
			for _, ref := range pos {
				if err := c.DeleteSnapshot(ctx, ref); err != nil {
					return fmt.Errorf("snapshot %s: %w", ref, err)
				}
				if !r.out.structured() {
					fmt.Fprintln(std.Out, ref)
				}
			}
			if r.out.structured() {
				return r.out.print(std.Out, map[string][]string{"deleted": pos})
			}
			return nil
		}
	}
	return cmd
}

func snapshotList(ctx context.Context, c *client.Client, contextID string, out io.Writer, o output) error {
	l, err := c.ListSnapshots(ctx, contextID)
	if err != nil {
		return err
	}
	if o.structured() {
		return o.print(out, l)
	}
	return snapshotTable(out, l.Snapshots)
}

func snapshotTable(out io.Writer, l []api.Snapshot) error {
	rows := make([][]string, 0, len(l))
	for _, s := range l {
		rows = append(rows, []string{s.Name, s.ID, s.ContextID, s.Template, strconv.FormatInt(s.Bytes, 10), s.CreatedAt.Format("2006-01-02 15:04:05")})
	}
	return table(out, []string{"NAME", "ID", "CONTEXT", "FROM", "BYTES", "CREATED"}, rows)
}
