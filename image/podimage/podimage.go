// Package podimage makes the image a Kubernetes pod of a sandlot template
// runs: the template's own image plus one layer holding the static pod
// agent (cmd/sandlot-pod-agent) at AgentPath, which is the entrypoint
// (`sandlot-agent pod`: the path and the mode's name are the ones pod
// images have always had), and pushes it to a registry. On one host the
// runtime bind-mounts the agent into the sandbox; a pod has no such
// mount, so the agent travels in the image.
//
// The result is reproducible: the added layer's entries are sorted, owned
// by root and dated Epoch, and the config keeps the template's creation
// time, so the same template and agent give the same digest on any
// machine, and a push of an unchanged template uploads nothing.
package podimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"maps"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/layer"
)

// AgentPath is where the agent lives in a pod image.
const AgentPath = "/usr/local/bin/sandlot-agent"

// DefaultUser is the user a pod image runs as when the template's image
// names none: the sandbox user of sandlot's images (1000:1000), so a pod
// with runAsNonRoot starts.
const DefaultUser = "1000"

// Epoch dates the added layer's entries (2023-11-14, the Debian base's
// default SOURCE_DATE_EPOCH): any fixed time gives reproducible layers,
// one shared with the base keeps the image's times alike.
var Epoch = time.Unix(1700000000, 0)

// Labels the pod image carries, so a pod's image says which agent it has.
const (
	LabelAgent = "org.sandlot.agent.sha256" // the agent binary's SHA-256
)

// Entrypoint is the pod image's entrypoint: the pod agent (TCP listener,
// key from a file; cmd/sandlot-pod-agent).
func Entrypoint() []string { return []string{AgentPath, "pod"} }

// Build returns templateImage with the agent added as AgentPath (mode
// 0755, root) and the config changed so a pod runs it: the entrypoint is
// Entrypoint, the command is empty (an image's CMD would become the
// agent's arguments), the user is DefaultUser where the image names
// none, and LabelAgent names the agent. Env, working directory and the
// image's other settings stay. agentBinary must be a static ELF
// executable for the image's architecture: a dynamic one would need the
// host's loader and libraries, which the template's image may lack or
// have in other versions (invalid_argument). It must be the pod agent
// (cmd/sandlot-pod-agent, by its Go build information): the local
// sandboxes' sandlot-agent has no pod mode, and its pods would exit at
// once (invalid_argument).
func Build(ctx context.Context, templateImage v1.Image, agentBinary []byte) (v1.Image, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cf, err := templateImage.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("podimage: template image config: %w", err)
	}
	if err := CheckStatic(agentBinary, cf.Architecture, "the agent binary"); err != nil {
		return nil, err
	}
	if err := checkPodAgent(agentBinary); err != nil {
		return nil, err
	}
	mt, err := templateImage.MediaType()
	if err != nil {
		return nil, fmt.Errorf("podimage: template image: %w", err)
	}
	layerType := types.DockerLayer
	if mt == types.OCIManifestSchema1 {
		layerType = types.OCILayer
	}
	l, err := layer.Files(Epoch, layerType, layer.File{Path: AgentPath, Mode: 0o755, Body: agentBinary})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(agentBinary)
	img, err := mutate.Append(templateImage, mutate.Addendum{Layer: l, History: v1.History{
		Created:   v1.Time{Time: Epoch.UTC()},
		CreatedBy: "sandlot podimage: " + AgentPath + " (sha256:" + hex.EncodeToString(sum[:]) + ")",
		Comment:   "sandlot-pod-agent as the pod's entrypoint",
	}})
	if err != nil {
		return nil, fmt.Errorf("podimage: %w", err)
	}
	cf, err = img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("podimage: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Config.Entrypoint = Entrypoint()
	cf.Config.Cmd = nil
	if cf.Config.User == "" {
		cf.Config.User = DefaultUser
	}
	labels := maps.Clone(cf.Config.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelAgent] = hex.EncodeToString(sum[:])
	cf.Config.Labels = labels
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("podimage: %w", err)
	}
	return img, nil
}

// machines maps ELF machines to the architectures images name.
var machines = map[elf.Machine]string{
	elf.EM_X86_64:  "amd64",
	elf.EM_AARCH64: "arm64",
	elf.EM_386:     "386",
	elf.EM_ARM:     "arm",
	elf.EM_RISCV:   "riscv64",
	elf.EM_PPC64:   "ppc64le",
	elf.EM_S390:    "s390x",
}

// PodAgentPackage is the Go package of the binary a pod image carries.
const PodAgentPackage = "github.com/sandlot/sandlot/cmd/sandlot-pod-agent"

// checkPodAgent: bin is a build of PodAgentPackage.
func checkPodAgent(bin []byte) error {
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("podimage: the agent binary has no Go build information (%v); a pod image carries sandlot-pod-agent: %w", err, errdefs.ErrInvalidArgument)
	}
	if bi.Path != PodAgentPackage {
		return fmt.Errorf("podimage: the agent binary is a build of %s; a pod image carries sandlot-pod-agent (%s): %w", bi.Path, PodAgentPackage, errdefs.ErrInvalidArgument)
	}
	return nil
}

// CheckStatic refuses a binary (what names it in errors) that cannot run
// in an image of architecture arch whatever the image holds: no ELF
// executable, a dynamically linked one (it names a loader), or one for
// another architecture (invalid_argument).
func CheckStatic(bin []byte, arch, what string) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("podimage: %s is not an ELF executable (%v): %w", what, err, errdefs.ErrInvalidArgument)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("podimage: %s is an ELF %s, not an executable: %w", what, f.Type, errdefs.ErrInvalidArgument)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("podimage: %s is dynamically linked (it names a loader); build it with CGO_ENABLED=0: %w", what, errdefs.ErrInvalidArgument)
		}
	}
	if arch == "" {
		arch = "amd64" // an image that names none is taken as linux/amd64, as image/source does
	}
	got, ok := machines[f.Machine]
	if !ok || got != arch {
		return fmt.Errorf("podimage: %s is for %s, the image for %s: %w", what, f.Machine, arch, errdefs.ErrInvalidArgument)
	}
	return nil
}
