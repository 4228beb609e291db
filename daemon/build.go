package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"

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

// network is the build steps' policy: none without sandbox networks or
// with "none".
func (f Build) network(networks bool) (*local.BuildConfig, error) {
	cfg := &local.BuildConfig{}
	if !networks || f.Allow == "none" || f.Allow == "" {
		return cfg, nil
	}
	var rules []string
	for _, r := range strings.Split(f.Allow, ",") {
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
// it is set); RUN steps run in sandboxes of p (provider/local). It is
// what every entry point that builds (E2B's Template.build, the CLI, /v1)
// calls. A tenant's build (templates/builds) finds its FROM through the
// queue instead (tenantPull), never in the store.
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

// tenantPull is a tenant build's FROM pull (builds.Config.Pull, serve's
// --build-pull): every connection checked by guard (the public internet,
// or the --pull-allow-cidr ranges), with the recipe's credentials or
// none (never the daemon's docker config, which holds the operator's),
// naming nothing in the store (the build's lease keeps the image until
// its record does), and downloading every layer, also one the store has
// (a digest is no proof of having the content: image.PutOptions.Untrusted).
func tenantPull(s *image.Store, guard *network.DialGuard) func(ctx context.Context, ref string, auth *recipe.RegistryAuth) (image.Image, error) {
	return func(ctx context.Context, ref string, auth *recipe.RegistryAuth) (image.Image, error) {
		opts := source.PullOptions{Transport: guard.Transport(), Keychain: staticKeychain{authn.Anonymous}, Untrusted: true}
		if auth != nil {
			opts.Keychain = staticKeychain{authn.FromConfig(authn.AuthConfig{Username: auth.Username, Password: auth.Password})}
		}
		pulled, err := source.Pull(ctx, s, ref, opts)
		if err != nil {
			return image.Image{}, err
		}
		return pulled.Image, nil
	}
}

// staticKeychain answers every registry with the recipe's credentials.
type staticKeychain struct{ a authn.Authenticator }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.a, nil }

// buildQueue is the daemon's one queue of template builds, which E2B's
// Template.build and /v1/templates/builds share, when the daemon runs
// local sandboxes on an image store with a catalog; nil otherwise.
func buildQueue(cfg Config, prov contexts.Provider, cat *templates.Catalog, g contexts.Guard, log *slog.Logger) (*builds.Queue, error) {
	p, ok := prov.(*local.Provider)
	if !ok || p.Images() == nil || cat == nil {
		return nil, nil
	}
	bc, err := cfg.Build.network(cfg.Network.Enabled)
	if err != nil {
		return nil, err
	}
	bcfg := builds.Config{
		Builder: NewBuilder(p, p.Images(), *bc, false, nil, log),
		Images:  p.Images(),
		Catalog: cat,
		Guard: func(ctx context.Context, tenantID, text string) string {
			return g.Text(contexts.WithTaskType(ctx, contexts.TaskTemplateBuild), tenantID, text)
		},
		Logger: log,
	}
	if cfg.Build.Pull {
		bcfg.Pull = tenantPull(p.Images(), &network.DialGuard{Allow: cfg.Build.PullAllow})
	}
	return builds.New(bcfg), nil
}
