package cli

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/daemon"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/provider/local"
)

// The sandboxes `sandlot run --keep` leaves running live in the CLI's own
// state dir (lrunStateDir), which no daemon reconciles: ps lists them and
// prune destroys them.
func init() {
	commands = append(commands, newPSCmd, newPruneCmd)
}

// keptFlags are the flags of ps and prune: where run keeps its sandboxes.
type keptFlags struct {
	stateDir, runtime string
	out               output
}

func (k *keptFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&k.stateDir, "state-dir", lrunStateDir, "state directory of the CLI's sandboxes (as given to run)")
	fs.StringVar(&k.runtime, "runtime", "auto", "OCI runtime: auto, crun, runc or runsc")
	k.out.register(cmd)
}

func (k *keptFlags) provider() (*local.Provider, error) {
	return local.New(local.Config{Runtime: k.runtime, StateDir: k.stateDir, Logger: slog.New(slog.DiscardHandler)})
}

// keptSandbox is one line of ps.
type keptSandbox struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created,omitzero"`
}

func newPSCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "ps", Short: "list the sandboxes `sandlot run --keep` left running", Args: cobra.NoArgs,
		Example: `  sandlot run --keep 'x = 1'
  sandlot ps
  sandlot ps -o json`}
	var k keptFlags
	k.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		p, err := k.provider()
		if err != nil {
			return err
		}
		ids, err := p.List(ctx)
		if err != nil {
			return err
		}
		list := make([]keptSandbox, 0, len(ids))
		for _, id := range ids {
			s := keptSandbox{ID: id}
			if fi, err := os.Stat(filepath.Join(k.stateDir, "sandboxes", id)); err == nil {
				s.Created = fi.ModTime()
			}
			list = append(list, s)
		}
		if k.out.structured() {
			return k.out.print(std.Out, list)
		}
		rows := make([][]string, 0, len(list))
		for _, s := range list {
			rows = append(rows, []string{s.ID, ago(s.Created)})
		}
		return table(std.Out, []string{"SANDBOX", "CREATED"}, rows)
	}
	return cmd
}

func newPruneCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "prune [ID...]", Short: "destroy sandboxes `sandlot run --keep` left running (all, or the ids given)",
		Long: "Destroys the given kept sandboxes, or all of them. With a daemon's --state-dir it destroys the sandboxes a\n" +
			"daemon stopped for good left (they are kept for its restart); it refuses while a daemon holds the dir.",
		Example: `  sandlot prune
  sandlot prune sb-0ad2b03389fd
  sandlot prune --state-dir /run/sandlot     # what a stopped daemon left`}
	var k keptFlags
	k.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, ids []string) error {
		ctx, std := cmd.Context(), ioOf(cmd)
		// A daemon's state dir is prune's too once the daemon has stopped
		// for good (its sandboxes stay for its restart); while a daemon
		// holds it, its sandboxes are its contexts' and end through it.
		release, err := daemon.LockStateDirFor(k.stateDir,
			"its sandboxes end through it (sandlot ctx rm); stop it first to prune what it left")
		if err != nil {
			return err
		}
		defer release()
		p, err := k.provider()
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			if ids, err = p.List(ctx); err != nil {
				return err
			}
		} else {
			known, err := p.List(ctx)
			if err != nil {
				return err
			}
			have := map[string]bool{}
			for _, id := range known {
				have[id] = true
			}
			for _, id := range ids {
				if !have[id] {
					return fmt.Errorf("kept sandbox %s: %w", id, errdefs.ErrNotFound)
				}
			}
		}
		for _, id := range ids {
			if err := p.Destroy(ctx, id); err != nil {
				return err
			}
			if !k.out.structured() {
				fmt.Fprintf(std.Out, "destroyed %s\n", id)
			}
		}
		if k.out.structured() {
			if ids == nil {
				ids = []string{}
			}
			return k.out.print(std.Out, map[string]any{"destroyed": ids})
		}
		return nil
	}
	return cmd
}
