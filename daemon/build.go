package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	flag "github.com/spf13/pflag"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/image/recipe"
	"github.com/sandlot/sandlot/image/source"
	"github.com/sandlot/sandlot/network"
	"github.com/sandlot/sandlot/provider/local"
	"github.com/sandlot/sandlot/templates"
	"github.com/sandlot/sandlot/templates/builds"
)

// buildFlags configure template builds (docs/images.md, Builds).
type buildFlags struct {
	allow string
	pull  bool
	// pullAllow: --pull-allow-cidr, the ranges tenants' pulls may reach.
	pullAllow cidrList
}

// cidrList is a repeatable flag of address ranges, each value one or
// more comma-separated CIDRs (or single addresses).
type cidrList []netip.Prefix

func (l *cidrList) String() string {
	var parts []string
	for _, p := range *l {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ",")
}

func (l *cidrList) Type() string { return "CIDR,..." }

func (l *cidrList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return fmt.Errorf("%q is not a CIDR range or an address", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		*l = append(*l, p.Masked())
	}
	return nil
}

func (f *buildFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.allow, "build-allow", strings.Join(local.DefaultBuildAllow, ","),
		`what a build's RUN steps may reach, comma-separated allowlist rules (needs --network; "none": no network)`)
	fs.BoolVar(&f.pull, "build-pull", false, "a build's FROM may pull an image the store lacks from its registry (on the public internet, or a --pull-allow-cidr range)")
	fs.Var(&f.pullAllow, "pull-allow-cidr", "address ranges a tenant's template pull (and a build's FROM pull) may connect to besides the public internet, comma-separated or repeated; loopback, private, link-local, CGNAT, metadata and the host's own addresses are refused otherwise (metadata and host addresses open only when listed as single addresses)")
}

// network is the build steps' policy: nil without sandbox networks or
// with "none".
func (f buildFlags) network(networks bool) (*local.BuildConfig, error) {
	cfg := &local.BuildConfig{}
	if !networks || f.allow == "none" || f.allow == "" {
		return cfg, nil
	}
	var rules []string
	for _, r := range strings.Split(f.allow, ",") {
		if r = strings.TrimSpace(r); r != "" {
			rules = append(rules, r)
		}
	}
	p, err := local.BuildNetwork(rules)
	if err != nil {
		return nil, fmt.Errorf("--build-allow: %w", err)
	}
	cfg.Network = p
	return cfg, nil
}

// NewBuilder returns the builder of templates: FROM looks in the store,
// then, with pull, pulls from the registry (through guard's checks when
// it is set: tenants' builds); RUN steps run in sandboxes of p
// (provider/local). It is what every entry point that builds (E2B's
// Template.build, the CLI, /v1) calls.
func NewBuilder(p *local.Provider, s *image.Store, cfg local.BuildConfig, pull bool, guard *network.DialGuard, log *slog.Logger) *build.Builder {
	return build.New(build.Config{
		Store:  s,
		Runner: p.BuildRunner(cfg),
		Resolve: func(ctx context.Context, ref string, auth *recipe.RegistryAuth) (image.Image, error) {
			img, err := s.Get(ctx, ref)
			if err == nil || !pull {
				return img, err
			}
			opts := source.PullOptions{}
			if guard != nil {
				opts.Transport = guard.Transport()
			}
			if auth != nil {
				opts.Keychain = staticKeychain{authn.FromConfig(authn.AuthConfig{Username: auth.Username, Password: auth.Password})}
			}
			pulled, err := source.Pull(ctx, s, ref, opts)
			if err != nil {
				return image.Image{}, err
			}
			return pulled.Image, nil
		},
		Logger: log,
	})
}

// staticKeychain answers every registry with the recipe's credentials.
type staticKeychain struct{ a authn.Authenticator }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.a, nil }

// buildQueue is the daemon's one queue of template builds, which E2B's
// Template.build and /v1/templates/builds share, when the daemon runs
// local sandboxes on an image store with a catalog; nil otherwise.
func buildQueue(cfg serveConfig, prov contexts.Provider, cat *templates.Catalog, g contexts.Guard, log *slog.Logger) (*builds.Queue, error) {
	p, ok := prov.(*local.Provider)
	if !ok || p.Images() == nil || cat == nil {
		return nil, nil
	}
	bc, err := cfg.build.network(cfg.network.enabled)
	if err != nil {
		return nil, err
	}
	return builds.New(builds.Config{
		Builder: NewBuilder(p, p.Images(), *bc, cfg.build.pull, &network.DialGuard{Allow: cfg.build.pullAllow}, log),
		Images:  p.Images(),
		Catalog: cat,
		Guard:   g.Text,
		Logger:  log,
	}), nil
}
