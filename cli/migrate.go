package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/store"
)

func init() {
	commands = append(commands, newMigrateCmd)
}

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "bring the store's schema to this sandlot's (serve also does at start); --dry-run lists what it would apply",
		Long: `Applies the schema migrations this sandlot has and the store lacks, in order, each recorded in
schema_migrations; serve does the same at start, so running migrate first is a choice (to upgrade
at a time of your own, after a backup). Stop the daemons on the store first: a daemon of the older
release must not run on the newer schema. With --dry-run it lists them (number and name) and changes
nothing: the store is opened read-only and no file is created.

A store migrated by a newer sandlot is refused, by migrate as by serve: sandlot never migrates a
schema down. Several daemons on one Postgres database are upgraded together (docs/stores.md).`,
		Args: cobra.NoArgs,
		Example: `  sudo sandlot migrate --dry-run --data-dir /var/lib/sandlot
  sudo sandlot migrate --data-dir /var/lib/sandlot
  sandlot migrate --dry-run --store postgres://sandlot@db/sandlot -o json`,
	}
	var sf storeFlags
	sf.register(cmd.Flags())
	configFile := cmd.Flags().String("config", os.Getenv(envConfig), "serve's config file, whose data-dir and store keys are read ($"+envConfig+")")
	dry := cmd.Flags().Bool("dry-run", false, "list the migrations it would apply and change nothing")
	var out output
	out.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if _, err := applyConfig(cmd.Flags(), *configFile, serveKeys()); err != nil {
			return err
		}
		return runMigrate(cmd.Context(), ioOf(cmd), sf, *dry, out)
	}
	return cmd
}

// migrateReport is what migrate prints with -o json.
type migrateReport struct {
	Store   string            `json:"store"`
	From    int               `json:"from"`
	To      int               `json:"to"`
	DryRun  bool              `json:"dryRun"`
	Applied []store.Migration `json:"migrations"`
}

func runMigrate(ctx context.Context, std IO, sf storeFlags, dry bool, out output) error {
	url := sf.storeURL()
	sc, err := store.InspectSchema(ctx, url)
	if err != nil {
		return err
	}
	if err := sc.Err(); err != nil {
		return err
	}
	where := "postgres"
	if p := store.SQLitePath(url); p != "" {
		where = p
	}
	rep := migrateReport{Store: where, From: sc.Current, To: sc.Latest, DryRun: dry, Applied: sc.Pending}
	if !dry && len(sc.Pending) > 0 {
		st, err := sf.open(ctx) // Open applies what is pending
		if err != nil {
			return err
		}
		if err := st.Close(); err != nil {
			return err
		}
	}
	if out.structured() {
		return out.print(std.Out, rep)
	}
	switch {
	case len(sc.Pending) == 0:
		fmt.Fprintf(std.Out, "%s is at schema %d, this sandlot's: nothing to do\n", where, sc.Current)
		return nil
	case dry && !sc.Exists:
		fmt.Fprintf(std.Out, "%s does not exist; serve or migrate would make it at schema %d with:\n", where, sc.Latest)
	case dry:
		fmt.Fprintf(std.Out, "%s is at schema %d; migrating to %d would apply:\n", where, sc.Current, sc.Latest)
	default:
		fmt.Fprintf(std.Out, "%s migrated from schema %d to %d:\n", where, sc.Current, sc.Latest)
	}
	for _, m := range sc.Pending {
		fmt.Fprintf(std.Out, "  %04d  %s\n", m.Version, m.Name)
	}
	return nil
}
