// Package daemonimage makes the container image of the sandlot daemon,
// without a Docker engine: a Debian base made by image/debian (mmdebstrap,
// as the default template's image) with what `sandlot serve` needs on one
// host (Packages), plus one layer holding the static sandlot and
// sandlot-agent, entrypoint `sandlot serve`. The same image runs the
// daemon on one host (privileged: it makes namespaces, cgroups and
// nftables rules) and as the replicas of the Helm chart, where the
// kubernetes provider runs sandboxes as pods instead.
//
// The binaries' layer is reproducible (sorted entries, root-owned, dated
// debian.DefaultEpoch): the same binaries give the same layer digest. The
// Debian layer is cached in an image store under its recipe's key; a
// fresh build of it is as reproducible as the mirror's package set at
// that moment (docs/kubernetes.md, "Images").
package daemonimage

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/debian"
	"github.com/sandlot/sandlot/image/layer"
	"github.com/sandlot/sandlot/image/podimage"
)

// Packages is the daemon image's package list beyond Debian's essential
// set and apt, each for a reason:
//   - crun, runc: the OCI runtimes the local provider runs sandboxes with
//     (--runtime auto takes crun, else runc); libseccomp2 comes with them.
//   - ca-certificates: TLS to registries (template pulls, pushes), to E2B's
//     cloud (the e2b provider), to a Postgres with sslmode=verify-full.
//   - mmdebstrap, gpg, libdpkg-perl, debian-archive-keyring: the default
//     template's image (--default-image debian) and the desktop and
//     code-interpreter templates are built by the daemon with mmdebstrap at
//     first use; gpg, libdpkg-perl and the keyring are what mmdebstrap only
//     recommends but needs to verify and unpack Debian's packages.
//   - nftables, iproute2: the daemon itself speaks netlink (its rules and
//     sandbox networks need no binary), but `nft list ruleset` and `ip` in
//     the daemon's container are how an operator sees what --network made.
//
// gVisor's runsc is not a Debian package: a host that wants --runtime
// runsc mounts its own build into the container (docs/install.md).
var Packages = []string{
	"ca-certificates", "crun", "debian-archive-keyring", "gpg", "iproute2",
	"libdpkg-perl", "mmdebstrap", "nftables", "runc",
}

// BaseConfig is the recipe of the daemon image's Debian base.
func BaseConfig() debian.Config {
	return debian.Config{Packages: Packages}
}

// Base returns the daemon image's Debian base from s, building it with
// mmdebstrap when s has none of this recipe (minutes; root and
// mmdebstrap on the host).
func Base(ctx context.Context, s *image.Store, progress func(debian.Progress)) (v1.Image, error) {
	img, err := debian.Ensure(ctx, s, BaseConfig(), "", progress)
	if err != nil {
		return nil, err
	}
	return s.V1(ctx, img.Digest)
}

// Where the binaries live in the image, and the daemon's defaults there.
const (
	SandlotPath = "/usr/local/bin/sandlot"
	AgentPath   = "/usr/local/bin/sandlot-agent"
	DataDir     = "/var/lib/sandlot"
	Port        = "7423"
)

// Epoch dates the binaries' layer and the image: the Debian base's.
var Epoch = time.Unix(debian.DefaultEpoch, 0)

// Build returns base with the static sandlot and sandlot-agent added and
// the config of a daemon: entrypoint `sandlot serve`, listening on
// 0.0.0.0:7423 ($SANDLOT_ADDR), state in /var/lib/sandlot
// ($SANDLOT_DATA_DIR, a volume), as root (it makes namespaces, cgroups
// and nftables rules), version in the OCI labels. Both binaries must be
// static ELF executables for the base's architecture (invalid_argument).
func Build(ctx context.Context, base v1.Image, sandlot, agent []byte, version string) (v1.Image, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cf, err := base.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("daemonimage: base config: %w", err)
	}
	for what, bin := range map[string][]byte{"the sandlot binary": sandlot, "the agent binary": agent} {
		if err := podimage.CheckStatic(bin, cf.Architecture, what); err != nil {
			return nil, err
		}
	}
	mt, err := base.MediaType()
	if err != nil {
		return nil, err
	}
	layerType := types.DockerLayer
	if mt == types.OCIManifestSchema1 {
		layerType = types.OCILayer
	}
	l, err := layer.Files(Epoch, layerType,
		layer.File{Path: SandlotPath, Mode: 0o755, Body: sandlot},
		layer.File{Path: AgentPath, Mode: 0o755, Body: agent})
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(base, mutate.Addendum{Layer: l, History: v1.History{
		Created: v1.Time{Time: Epoch.UTC()}, CreatedBy: "sandlot daemonimage: " + SandlotPath + ", " + AgentPath,
	}})
	if err != nil {
		return nil, fmt.Errorf("daemonimage: %w", err)
	}
	cf, err = img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: Epoch.UTC()}
	labels := maps.Clone(cf.Config.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels["org.opencontainers.image.title"] = "sandlot"
	labels["org.opencontainers.image.description"] = "sandlot daemon: sandboxes for AI agents (sandlot serve)"
	labels["org.opencontainers.image.version"] = version
	labels["org.opencontainers.image.licenses"] = "Apache-2.0"
	cf.Config = v1.Config{
		Entrypoint:   []string{SandlotPath, "serve"},
		Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "SANDLOT_ADDR=0.0.0.0:" + Port, "SANDLOT_DATA_DIR=" + DataDir},
		WorkingDir:   DataDir,
		User:         "0",
		ExposedPorts: map[string]struct{}{Port + "/tcp": {}},
		Volumes:      map[string]struct{}{DataDir: {}},
		StopSignal:   "SIGTERM",
		Labels:       labels,
	}
	return mutate.ConfigFile(img, cf)
}

// WriteLayout writes img as an OCI image layout in dir (replacing what
// dir held), its index entry named ref (org.opencontainers.image.ref.name),
// which `podman load`, `skopeo copy oci:DIR` and `ctr import` read.
func WriteLayout(dir string, img v1.Image, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref}))
}
