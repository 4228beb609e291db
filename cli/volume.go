package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// sandlot volume: the tenant's volumes through a daemon's /v1/volumes
// (docs/volumes.md). A sandbox mounts one through E2B's volumeMounts.

func init() {
	commands = append(commands, func() *cobra.Command {
		cmd := verbGroup("volume", "create, list, inspect and remove volumes (create, ls, inspect, rm)",
			newVolumeCreate(), newVolumeLs(), newVolumeInspect(), newVolumeRm())
		cmd.Example = `  sandlot volume create data --size-mib 2048
  sandlot volume ls
  sandlot volume inspect data -o json
  sandlot volume rm data`
		return cmd
	})
}

func newVolumeCreate() *cobra.Command {
	cmd := &cobra.Command{Use: "create NAME", Short: "create a volume", Args: cobra.ExactArgs(1),
		Example: `  sandlot volume create data
  sandlot volume create scratch --size-mib 256`}
	var r remote
	r.register(cmd)
	size := cmd.Flags().Int64("size-mib", 0, "the volume's size in MiB: what a sandbox can write before ENOSPC (0: the daemon's default, 1024)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		if *size < 0 {
			return usageErr("volume create: --size-mib must not be negative")
		}
		c, err := r.client()
		if err != nil {
			return err
		}
		v, err := c.CreateVolume(ctx, args[0], *size<<20)
		if err != nil {
			return err
		}
		if r.out.structured() {
			return r.out.print(std.Out, v)
		}
		fmt.Fprintf(std.Out, "%s %s %s\n", v.Name, v.ID, humanBytes(v.SizeBytes))
		return nil
	}
	return cmd
}

func newVolumeLs() *cobra.Command {
	cmd := &cobra.Command{Use: "ls", Aliases: []string{"list"}, Short: "list volumes", Args: cobra.NoArgs,
		Example: `  sandlot volume ls
  sandlot volume ls -o json`}
	var r remote
	r.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		c, err := r.client()
		if err != nil {
			return err
		}
		l, err := c.ListVolumes(ctx)
		if err != nil {
			return err
		}
		if r.out.structured() {
			return r.out.print(std.Out, l)
		}
		rows := make([][]string, 0, len(l.Volumes))
		for _, v := range l.Volumes {
			rows = append(rows, []string{v.Name, v.ID, humanBytes(v.SizeBytes), ago(v.CreatedAt)})
		}
		return table(std.Out, []string{"NAME", "ID", "SIZE", "CREATED"}, rows)
	}
	return cmd
}

func newVolumeInspect() *cobra.Command {
	cmd := &cobra.Command{Use: "inspect NAME|ID", Aliases: []string{"get"}, Short: "show a volume, its use of the host's disk and the contexts that mount it", Args: cobra.ExactArgs(1),
		Example: `  sandlot volume inspect data
  sandlot volume inspect vol0123456789abcdefghij -o json`}
	var r remote
	r.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		c, err := r.client()
		if err != nil {
			return err
		}
		v, err := c.GetVolume(ctx, args[0])
		if err != nil {
			return err
		}
		if r.out.structured() {
			return r.out.print(std.Out, v)
		}
		mounted := strings.Join(v.MountedBy, ",")
		if mounted == "" {
			mounted = "-"
		}
		return table(std.Out, []string{"NAME", "ID", "SIZE", "USED", "CREATED", "MOUNTED BY"},
			[][]string{{v.Name, v.ID, humanBytes(v.SizeBytes), humanBytes(v.UsedBytes), v.CreatedAt.Format(time.RFC3339), mounted}})
	}
	return cmd
}

func newVolumeRm() *cobra.Command {
	cmd := &cobra.Command{Use: "rm NAME|ID...", Aliases: []string{"delete"}, Short: "remove volumes (refused while a sandbox mounts one)", Args: cobra.MinimumNArgs(1),
		Example: `  sandlot volume rm data
  sandlot volume rm scratch other`}
	var r remote
	r.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		c, err := r.client()
		if err != nil {
			return err
		}
		for _, ref := range args {
			if err := c.DeleteVolume(ctx, ref); err != nil {
				return err
			}
			if !r.out.structured() {
				fmt.Fprintf(std.Out, "removed %s\n", ref)
			}
		}
		return nil
	}
	return cmd
}
