package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sandlot/sandlot/backup"
)

func init() {
	commands = append(commands, newBackupCmd, newRestoreCmd)
}

func newBackupCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup --out FILE",
		Short: "copy the data dir's state (store, secrets key, state files) into one archive, while the daemon runs",
		Long: `Writes one archive (tar.gz, mode 0600) of the data dir's state: a consistent copy of the SQLite
store (VACUUM INTO, safe while serve runs), the secrets key (unless --without-secrets-key, or the
daemon reads it from --secrets-key-file or $SANDLOT_SECRETS_KEY), the guard's HMAC key, the metrics
token, the E2B token secret and plan usage, the api-key file, and a manifest of versions, schema
and SHA-256 checksums. With --templates it adds the images of every template record, so a restore
on another host brings the templates back whole. The archive holds the key that opens every stored
secret: keep it as you keep the data dir. A Postgres store is backed up with pg_dump (the command
says which files to copy besides).`,
		Args: cobra.NoArgs,
		Example: `  sudo sandlot backup --data-dir /var/lib/sandlot --out /srv/backup/sandlot-$(date +%F).tar.gz
  sudo sandlot backup --data-dir /var/lib/sandlot --out b.tar.gz --templates
  sudo sandlot backup --data-dir /var/lib/sandlot --out b.tar.gz --without-secrets-key -o json`,
	}
	var sf storeFlags
	fs := cmd.Flags()
	sf.register(fs)
	fs.StringVar(&sf.secretsKeyFile, "secrets-key-file", "", "the daemon's --secrets-key-file, if it has one: the key is then outside the data dir and not copied")
	configFile := fs.String("config", os.Getenv(envConfig), "serve's config file, whose data-dir, store and secrets-key-file keys are read ($"+envConfig+")")
	outPath := fs.String("out", "", "the archive to write (must not exist)")
	noKey := fs.Bool("without-secrets-key", false, "leave the secrets key out (keep it elsewhere; stored secrets do not open without it)")
	tpl := fs.Bool("templates", false, "add the images of every template record (large: each template's image layers)")
	images := fs.String("images-dir", "", "with --templates: the image store (default DATA_DIR/images)")
	var out output
	out.register(cmd)
	cmd.MarkFlagRequired("out")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if _, err := applyConfig(fs, *configFile, serveKeys()); err != nil {
			return err
		}
		m, err := backup.Create(cmd.Context(), backup.Config{
			DataDir: sf.dataDir, StoreURL: sf.url, Out: *outPath, Sandlot: Version(),
			WithoutSecretsKey: *noKey, ExternalKey: sf.secretsKeyFile != "" || os.Getenv(envSecretsKey) != "",
			Templates: *tpl, ImagesDir: *images,
		})
		if err != nil {
			return err
		}
		if out.structured() {
			return out.print(cmd.OutOrStdout(), m)
		}
		return printBackup(ioOf(cmd), "backed up "+sf.dataDir+" to "+*outPath, m)
	}
	return cmd
}

func printBackup(std IO, title string, m backup.Manifest) error {
	fmt.Fprintf(std.Out, "%s\n  sandlot %s, schema %d, %s\n  %s\n", title, m.Sandlot, m.Schema, m.CreatedAt.Format("2006-01-02 15:04:05Z"), m.SecretsKeyNote)
	for _, f := range m.Files {
		fmt.Fprintf(std.Out, "  %-16s %10d  sha256:%s\n", f.Name, f.Size, f.SHA256[:16])
	}
	for _, t := range m.Templates {
		fmt.Fprintf(std.Out, "  template %s (%s)\n", t.Name, t.ID)
	}
	return nil
}

func newRestoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore --from FILE --data-dir DIR",
		Short: "bring a sandlot backup back into a data dir (empty, or --force)",
		Long: `Checks the archive (every member named by its manifest, a regular file of the size and SHA-256 the
manifest says; nothing else is written) and that its schema is not newer than this sandlot's, then
puts the store and the state files into --data-dir, and the templates' images into its image store.
The target must be empty or absent; --force replaces the state files of a data dir whose daemon is
stopped. Start serve on the data dir afterwards; it migrates an older schema at start.`,
		Args: cobra.NoArgs,
		Example: `  sudo sandlot restore --from sandlot-2026-11-29.tar.gz --data-dir /var/lib/sandlot
  sudo systemctl stop sandlot && sudo sandlot restore --from b.tar.gz --data-dir /var/lib/sandlot --force`,
	}
	fs := cmd.Flags()
	from := fs.String("from", "", "the archive sandlot backup wrote")
	dir := fs.String("data-dir", defaultDataDir(), "the data dir to restore into ($"+envDataDir+")")
	force := fs.Bool("force", false, "replace the state of a data dir that is not empty (stop its daemon first)")
	images := fs.String("images-dir", "", "where the templates' images go (default DATA_DIR/images)")
	maxBytes := fs.Int64("max-bytes", 0, "largest database or templates member accepted (0: 64 GiB)")
	configFile := fs.String("config", os.Getenv(envConfig), "serve's config file, whose data-dir and images-dir keys are read ($"+envConfig+")")
	var out output
	out.register(cmd)
	cmd.MarkFlagRequired("from")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if _, err := applyConfig(fs, *configFile, serveKeys()); err != nil {
			return err
		}
		return runRestore(cmd.Context(), ioOf(cmd), backup.RestoreConfig{From: *from, DataDir: *dir, Force: *force, ImagesDir: *images, MaxBytes: *maxBytes}, out)
	}
	return cmd
}

func runRestore(ctx context.Context, std IO, cfg backup.RestoreConfig, out output) error {
	m, err := backup.Restore(ctx, cfg)
	if err != nil {
		return err
	}
	if out.structured() {
		return out.print(std.Out, m)
	}
	return printBackup(std, "restored "+cfg.From+" into "+cfg.DataDir+"; start serve with --data-dir "+cfg.DataDir, m)
}
