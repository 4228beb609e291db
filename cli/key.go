package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

// sandlot key and sandlot usage: the caller's tenant's own API keys
// (/v1/keys) and its quotas with their use now (/v1/usage), as the
// console's Keys and Usage pages show them (docs/console.md). These act
// through the daemon with a key of the tenant; `sandlot tenant` is the
// operator's, on the store.

func init() {
	commands = append(commands, func() *cobra.Command {
		cmd := verbGroup("key", "list, create and revoke the tenant's API keys (list, create, revoke)",
			newKeyList(), newKeyCreate(), newKeyRevoke())
		cmd.Example = `  sandlot key list
  sandlot key create "ci runner"
  sandlot key revoke key_0123456789abcdef`
		return cmd
	}, newUsage)
}

func newKeyList() *cobra.Command {
	cmd := &cobra.Command{Use: "list", Aliases: []string{"ls"}, Short: "list the tenant's API keys (never a key: its prefix)", Args: cobra.NoArgs,
		Example: `  sandlot key list
  sandlot key list -o json`}
	var r remote
	r.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		c, err := r.client()
		if err != nil {
			return err
		}
		l, err := c.ListKeys(ctx)
		if err != nil {
			return err
		}
		if r.out.structured() {
			return r.out.print(std.Out, l)
		}
		rows := make([][]string, 0, len(l.Keys))
		for _, k := range l.Keys {
			name, used, cur := k.Name, "never", ""
			if name == "" {
				name = "-"
			}
			if k.LastUsedAt != nil {
				used = ago(*k.LastUsedAt)
			}
			if k.Current {
				cur = "*"
			}
			rows = append(rows, []string{k.ID, name, k.Prefix + "…", ago(k.CreatedAt), used, cur})
		}
		return table(std.Out, []string{"ID", "NAME", "PREFIX", "CREATED", "LAST USED", "CURRENT"}, rows)
	}
	return cmd
}

func newKeyCreate() *cobra.Command {
	cmd := &cobra.Command{Use: "create [NAME]", Short: "make an API key of the tenant; it is printed this once", Args: cobra.MaximumNArgs(1),
		Example: `  sandlot key create "ci runner"
  export SANDLOT_API_KEY=$(sandlot key create laptop)
  sandlot key create ci -o json`}
	var r remote
	r.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		c, err := r.client()
		if err != nil {
			return err
		}
		k, err := c.CreateKey(ctx, firstArg(args))
		if err != nil {
			return err
		}
		if r.out.structured() {
			return r.out.print(std.Out, k)
		}
		// The key alone on stdout, for $(...); what it is on stderr.
		fmt.Fprintf(std.Err, "created %s; the key is shown this once (the daemon keeps only its hash)\n", k.ID)
		fmt.Fprintln(std.Out, k.Key)
		return nil
	}
	return cmd
}

func newKeyRevoke() *cobra.Command {
	cmd := &cobra.Command{Use: "revoke ID...", Aliases: []string{"rm"}, Short: "revoke API keys of the tenant (not its last one)", Args: cobra.MinimumNArgs(1),
		Example: `  sandlot key revoke key_0123456789abcdef
  sandlot key list -o json | jq -r '.keys[] | select(.name == "old") | .id' | xargs sandlot key revoke`}
	var r remote
	r.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		c, err := r.client()
		if err != nil {
			return err
		}
		for _, id := range args {
			if err := c.RevokeKey(ctx, id); err != nil {
				return err
			}
			if !r.out.structured() {
				fmt.Fprintf(std.Out, "revoked %s\n", id)
			}
		}
		return nil
	}
	return cmd
}

func newUsage() *cobra.Command {
	cmd := &cobra.Command{Use: "usage", Short: "show the tenant's quotas and its use of each now", Args: cobra.NoArgs,
		Example: `  sandlot usage
  sandlot usage -o json`}
	var r remote
	r.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		c, err := r.client()
		if err != nil {
			return err
		}
		u, err := c.Usage(ctx)
		if err != nil {
			return err
		}
		if r.out.structured() {
			return r.out.print(std.Out, u)
		}
		rows := make([][]string, 0, len(u.Quotas))
		for _, q := range u.Quotas {
			show := func(n int64) string { return strconv.FormatInt(n, 10) }
			if q.Name == "volumeBytes" {
				show = humanBytes
			}
			used, limit := show(q.Used), "-" // no limit
			if q.Limit > 0 {
				limit = show(q.Limit)
			}
			rows = append(rows, []string{q.Name, used, limit, q.Description})
		}
		return table(std.Out, []string{"QUOTA", "USED", "LIMIT", "DESCRIPTION"}, rows)
	}
	return cmd
}
