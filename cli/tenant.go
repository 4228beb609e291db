package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"

	"github.com/sandlot/sandlot/daemon"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/store/audit"
	"github.com/sandlot/sandlot/tenant"
)

func init() {
	commands = append(commands, func() *cobra.Command {
		cmd := verbGroup("tenant", "manage tenants and API keys in the store (create, list, rotate-key, delete)",
			tenantVerb("create", "create NAME", nil, "create a tenant and print its API key", cobra.ExactArgs(1),
				`  sandlot tenant create acme
  sandlot tenant create acme --guard-mode report -o json
  sandlot tenant create hr --guard-entities PERSON,ADDRESS,DATE_OF_BIRTH
  sandlot tenant create ops --admin --store postgres://sandlot@db/sandlot`),
			tenantVerb("list", "list", []string{"ls"}, "list tenants", cobra.NoArgs,
				`  sandlot tenant list
  sandlot tenant list -o json`),
			tenantVerb("rotate-key", "rotate-key NAME|ID", nil, "give a tenant a new API key; the old one stops working", cobra.ExactArgs(1),
				`  sandlot tenant rotate-key acme
  sandlot tenant rotate-key 6f1c2a9e-0b4d-4e57-9a43-2f6d8c1b7e05 -o json`),
			tenantVerb("delete", "delete NAME|ID", []string{"rm"}, "delete a tenant; a running server ends its contexts", cobra.ExactArgs(1),
				`  sandlot tenant delete acme`))
		cmd.Long = tenantLong
		cmd.Example = `  sandlot tenant create acme
  sandlot tenant list
  sandlot tenant rotate-key acme`
		return cmd
	})
}

// storeFlags are the flags of commands that open the store directly.
type storeFlags struct {
	dataDir, url string
	// keyed: open with the secrets key (daemon.SecretsKey), as the daemon does;
	// secretsKeyFile is --secrets-key-file.
	keyed          bool
	secretsKeyFile string
}

func (s *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.dataDir, "data-dir", defaultDataDir(), "data dir ($"+envDataDir+")")
	fs.StringVar(&s.url, "store", "", "store URL: sqlite:///path, postgres://..., memory: (default: SQLite in --data-dir)")
}

// storeURL is --store, or the SQLite database in the data dir.
func (s *storeFlags) storeURL() string {
	if s.url != "" {
		return s.url
	}
	abs, err := filepath.Abs(filepath.Join(s.dataDir, "sandlot.db"))
	if err != nil {
		abs = filepath.Join(s.dataDir, "sandlot.db")
	}
	return "sqlite://" + abs
}

func (s *storeFlags) open(ctx context.Context) (store.Backend, error) {
	if s.url == "" {
		if err := os.MkdirAll(s.dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
	}
	if !s.keyed {
		return store.Open(ctx, s.storeURL())
	}
	key, err := daemon.SecretsKey(s.dataDir, s.secretsKeyFile, os.Getenv(envSecretsKey))
	if err != nil {
		return nil, err
	}
	return store.OpenWith(ctx, s.storeURL(), store.Options{SecretsKey: key})
}

const tenantUsage = "usage: sandlot tenant create NAME [--admin] [--guard-mode M] [--guard-entities E] [--idle-suspend D] | list | rotate-key NAME|ID | delete NAME|ID [-o json|yaml|wide] [--data-dir DIR | --store URL]"

// tenantLong: these are admin operations, so they work on the store
// itself (--data-dir or --store) rather than over HTTP: whoever can read
// the store owns every tenant anyway.
const tenantLong = tenantUsage + `

Works on the store itself (--data-dir or --store), not over HTTP. A tenant's
name is unique, so a name stands for its id wherever one is asked. A running
server sees the changes within a second (its key cache TTL) and ends a
deleted tenant's contexts within seconds (its tenant reaper).`

// tenantVerb is one verb of tenant.
func tenantVerb(verb, use string, aliases []string, short string, args cobra.PositionalArgs, example string) *cobra.Command {
	cmd := &cobra.Command{Use: use, Aliases: aliases, Short: short, Args: args, Example: example}
	fs := cmd.Flags()
	var sf storeFlags
	sf.register(fs)
	var out output
	out.register(cmd)
	admin := false
	guard := tenant.GuardEnforce
	entities := "default"
	var idle time.Duration
	if verb == "create" {
		fs.DurationVar(&idle, "idle-suspend", 0, "suspend the tenant's idle contexts to disk after this long without a call, e.g. 10m (0: no setting; the smallest of serve's, the template's and the tenant's wins)")
		fs.BoolVar(&admin, "admin", false, "the tenant may override the guard mode per request and read every tenant's session metrics")
		fs.StringVar(&guard, "guard-mode", tenant.GuardEnforce, "egress guard: off, report, enforce")
		fs.StringVar(&entities, "guard-entities", "default", "entity types the egress guard finds in the tenant's output: default (serve's --guard-entities), all, none, or a list of PERSON,ADDRESS,ORGANIZATION,LOCATION,DATE_OF_BIRTH")
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var ents []string
		if verb == "create" && entities != "default" {
			var err error
			if ents, err = entityTypes(entities); err != nil {
				return err
			}
			if ents == nil { // all, chosen: the list, so a later --guard-entities does not change it
				ents = slices.Clone(tenant.GuardEntityTypes)
			}
		}
		if idle < 0 || idle%time.Second != 0 {
			return usageErr("tenant create: --idle-suspend %s: want whole seconds, 0 or more", idle)
		}
		return runTenant(cmd.Context(), ioOf(cmd), verb, args, sf, out, tenant.Tenant{Admin: admin, GuardMode: guard, GuardEntities: ents, IdleSuspendSeconds: int64(idle / time.Second)})
	}
	return cmd
}

// runTenant administers tenants.
func runTenant(ctx context.Context, std IO, verb string, args []string, sf storeFlags, out output, proto tenant.Tenant) error {
	admin, guard, ents := proto.Admin, proto.GuardMode, proto.GuardEntities
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	switch verb {
	case "create":
		if len(args) != 1 {
			return usageErr("tenant create: give one NAME")
		}
		if guard != tenant.GuardOff && guard != tenant.GuardReport && guard != tenant.GuardEnforce {
			return usageErr("tenant create: --guard-mode must be off, report or enforce")
		}
		t, key, err := createTenant(ctx, st, args[0], guard, admin, ents, proto.IdleSuspendSeconds)
		if err != nil {
			return err
		}
		if out.structured() {
			return out.print(std.Out, struct {
				*tenant.Tenant
				APIKey string `json:"apiKey"`
			}{t, key})
		}
		fmt.Fprintf(std.Out, "tenant %s (%s)\napi key: %s\nThe key is shown once; only its hash is stored.\n", t.Name, t.ID, key)
		return nil
	case "list":
		ts, err := st.ListTenants(ctx)
		if err != nil {
			return err
		}
		if out.structured() {
			if ts == nil {
				ts = []*tenant.Tenant{}
			}
			return out.print(std.Out, ts)
		}
		header := []string{"NAME", "ID", "KEY", "GUARD", "ADMIN", "CREATED"}
		if out.wide() {
			header = append(header, "KEY GENERATION")
		}
		rows := make([][]string, 0, len(ts))
		for _, t := range ts {
			row := []string{t.Name, t.ID, t.KeyPrefix + "…", t.GuardMode, fmt.Sprint(t.Admin), t.CreatedAt.Format(time.RFC3339)}
			if out.wide() {
				row = append(row, fmt.Sprint(t.KeyGeneration))
			}
			rows = append(rows, row)
		}
		return table(std.Out, header, rows)
	case "rotate-key":
		if len(args) != 1 {
			return usageErr("tenant rotate-key: give one tenant NAME or ID")
		}
		t, err := findTenant(ctx, st, args[0])
		if err != nil {
			return err
		}
		key, err := tenant.NewKey()
		if err != nil {
			return err
		}
		if err := st.SetKey(ctx, t.ID, tenant.HashKey(key), tenant.Prefix(key)); err != nil {
			return err
		}
		_ = st.AppendAudit(ctx, store.AuditEvent{TenantID: t.ID, Kind: audit.KindKeyRotated})
		if out.structured() {
			return out.print(std.Out, map[string]string{"id": t.ID, "name": t.Name, "apiKey": key})
		}
		fmt.Fprintf(std.Out, "new api key for %s (%s): %s\nThe old key and the E2B access tokens issued under it stop working at once here, and within a second on a running server (its caches).\n", t.Name, t.ID, key)
		return nil
	case "delete":
		if len(args) != 1 {
			return usageErr("tenant delete: give one tenant NAME or ID")
		}
		t, err := findTenant(ctx, st, args[0])
		if err != nil {
			return err
		}
		if err := st.DeleteTenant(ctx, t.ID); err != nil {
			return err
		}
		_ = st.AppendAudit(ctx, store.AuditEvent{TenantID: t.ID, Kind: audit.KindTenantDeleted})
		if out.structured() {
			return out.print(std.Out, map[string]string{"deleted": t.ID, "name": t.Name})
		}
		fmt.Fprintf(std.Out, "deleted tenant %s (%s); a running server stops accepting its key and tokens within a second and ends its contexts within seconds\n", t.Name, t.ID)
		return nil
	}
	return usageErr("tenant: unknown subcommand %q", verb)
}

// createTenant makes a tenant with a fresh key and returns the key, which
// exists nowhere else afterwards.
func createTenant(ctx context.Context, st store.Backend, name, guard string, admin bool, ents []string, idleSeconds int64) (*tenant.Tenant, string, error) {
	if name == "" {
		return nil, "", fmt.Errorf("tenant name is empty: %w", errdefs.ErrInvalidArgument)
	}
	key, err := tenant.NewKey()
	if err != nil {
		return nil, "", err
	}
	t := &tenant.Tenant{Name: name, GuardMode: guard, Admin: admin, KeyPrefix: tenant.Prefix(key), GuardEntities: ents, IdleSuspendSeconds: idleSeconds}
	if err := st.CreateTenant(ctx, t, tenant.HashKey(key)); err != nil {
		return nil, "", err
	}
	_ = st.AppendAudit(ctx, store.AuditEvent{TenantID: t.ID, Kind: audit.KindTenantCreated, Detail: map[string]string{"name": name}})
	return t, key, nil
}

// findTenant is the tenant whose id, else whose name, is ref: names are
// unique in the store, so a name stands for one tenant.
func findTenant(ctx context.Context, st store.Backend, ref string) (*tenant.Tenant, error) {
	t, err := st.GetTenant(ctx, ref)
	if err == nil || !errors.Is(err, errdefs.ErrNotFound) {
		return t, err
	}
	ts, lerr := st.ListTenants(ctx)
	if lerr != nil {
		return nil, fmt.Errorf("list tenants: %w", lerr)
	}
	for _, t := range ts {
		if t.Name == ref {
			return t, nil
		}
	}
	return nil, fmt.Errorf("no tenant has the name or id %q (sandlot tenant list shows them): %w", ref, errdefs.ErrNotFound)
}
