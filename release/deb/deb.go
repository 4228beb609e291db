// Package deb makes sandlot's Debian package with nfpm: the daemon and the
// agent in /usr/lib/sandlot (the daemon finds the agent beside itself), a
// /usr/bin/sandlot link, the hardened sandlot.service unit,
// /etc/sandlot/config.yaml as a conffile, and maintainer scripts that make
// the first API key on install, keep /var/lib/sandlot on remove and
// delete it on purge. The files it packages are in files/ (embedded);
// docs/install.md is the operator's side of them.
package deb

import (
	"cmp"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
)

//go:embed files
var embedded embed.FS

// Where the package puts its files.
const (
	Daemon     = "/usr/lib/sandlot/sandlot"
	Agent      = "/usr/lib/sandlot/sandlot-agent"
	PodAgent   = "/usr/lib/sandlot/sandlot-pod-agent"
	Command    = "/usr/bin/sandlot"
	Unit       = "/usr/lib/systemd/system/sandlot.service"
	ConfigFile = "/etc/sandlot/config.yaml"
	StateDir   = "/var/lib/sandlot"
	DocDir     = "/usr/share/doc/sandlot"
)

// Depends are the packages sandlot cannot run without (scripts/deps.sh's
// run rows): an OCI runtime, libseccomp, CA certificates, and mmdebstrap
// with what it needs to build the default template from Debian's mirror
// at first start (gpg, libdpkg-perl, the archive keyring, which mmdebstrap
// only recommends). The daemon and the agent are static Go binaries and
// link nothing else; nftables and links are made over netlink, so neither
// nft nor ip is needed.
var Depends = []string{
	"crun | runc",
	"libseccomp2",
	"ca-certificates",
	"mmdebstrap",
	"gpg",
	"libdpkg-perl",
	"debian-archive-keyring",
}

// Recommends is what the host template's sandboxes run (--host-template:
// the host's /usr, read-only): python3 with the data libraries, IPython,
// node. The default template brings its own in its image.
var Recommends = []string{
	"python3", "python3-numpy", "python3-pandas", "python3-matplotlib", "python3-pil", "python3-ipython", "nodejs",
}

// Suggests: tools to look at what the daemon makes (nft list ruleset, ip
// link) and the other runtime.
var Suggests = []string{"nftables", "iproute2", "runc"}

// Config says what to package.
type Config struct {
	// Version is the release's version as git describe gives it
	// (v0.1.0, v0.1.0-3-gabc1234, abc1234-dirty); DebianVersion makes
	// the package's.
	Version string
	// Arch is the Go architecture of the binaries: amd64 or arm64.
	Arch string
	// Sandlot, Agent and PodAgent are the binaries to package (make
	// dist's): PodAgent is what `sandlot template push` puts in a pod
	// image, found beside the daemon; "" packages none (a release from
	// before it).
	Sandlot, Agent, PodAgent string
	// Docs are files for DocDir by their name there (copyright,
	// changelog, install.md).
	Docs map[string]string
	// MTime is every file's time in the package (SOURCE_DATE_EPOCH), so
	// two builds of one version give the same bytes.
	MTime time.Time
	// Compression of the data: "" is xz (Debian's own), gzip is
	// faster to make (the install tests' packages).
	Compression string
}

var (
	tagged   = regexp.MustCompile(`^v?(\d+\.\d+\.\d+)(?:-(\d+)-g([0-9a-f]+))?(-dirty)?$`)
	revision = regexp.MustCompile(`^([0-9a-f]{7,40})(-dirty)?$`)
)

// DebianVersion is the package version of a git describe: v0.1.0 is
// 0.1.0; three commits past it, 0.1.0+3.gabc1234 (sorts after 0.1.0 and
// before 0.1.1); a tree with changes adds +dirty (~dirty would sort it
// before its commit); without a tag, 0.0.0~git.abc1234, below every release.
func DebianVersion(v string) (string, error) {
	if m := tagged.FindStringSubmatch(v); m != nil {
		out := m[1]
		if m[2] != "" {
			out += "+" + m[2] + ".g" + m[3]
		}
		if m[4] != "" {
			out += "+dirty"
		}
		return out, nil
	}
	if m := revision.FindStringSubmatch(v); m != nil {
		out := "0.0.0~git." + m[1]
		if m[2] != "" {
			out += "+dirty"
		}
		return out, nil
	}
	return "", fmt.Errorf("deb: version %q is neither a tag (vX.Y.Z) nor a git describe of one", v)
}

// Build writes the package to w. Scratch files (the embedded ones, for
// nfpm, which reads paths) go to a temporary directory it removes.
func Build(cfg Config, w io.Writer) error {
	version, err := DebianVersion(cfg.Version)
	if err != nil {
		return err
	}
	if cfg.MTime.IsZero() {
		return fmt.Errorf("deb: no MTime (SOURCE_DATE_EPOCH)")
	}
	tmp, err := os.MkdirTemp("", "sandlot-deb-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src, err := fs.Sub(embedded, "files")
	if err != nil {
		return err
	}
	if err := os.CopyFS(tmp, src); err != nil {
		return err
	}
	path := func(name string) string { return filepath.Join(tmp, name) }
	mode := func(m os.FileMode) *files.ContentFileInfo {
		return &files.ContentFileInfo{Owner: "root", Group: "root", Mode: m, MTime: cfg.MTime}
	}
	contents := files.Contents{
		{Source: cfg.Sandlot, Destination: Daemon, FileInfo: mode(0o755)},
		{Source: cfg.Agent, Destination: Agent, FileInfo: mode(0o755)},
		{Source: "../lib/sandlot/sandlot", Destination: Command, Type: files.TypeSymlink, FileInfo: mode(0o777)},
		{Source: path("sandlot.service"), Destination: Unit, FileInfo: mode(0o644)},
		// 0600: the file may hold a store URL with its password.
		{Source: path("config.yaml"), Destination: ConfigFile, Type: files.TypeConfig, FileInfo: mode(0o600)},
		{Destination: "/etc/sandlot", Type: files.TypeDir, FileInfo: mode(0o755)},
	}
	if cfg.PodAgent != "" {
		contents = append(contents, &files.Content{Source: cfg.PodAgent, Destination: PodAgent, FileInfo: mode(0o755)})
	}
	for name, p := range cfg.Docs {
		contents = append(contents, &files.Content{Source: p, Destination: DocDir + "/" + name, FileInfo: mode(0o644)})
	}
	info := &nfpm.Info{
		Name:          "sandlot",
		Arch:          cfg.Arch,
		Platform:      "linux",
		Version:       version,
		VersionSchema: "none",
		Section:       "admin",
		Priority:      "optional",
		Maintainer:    "sandlot maintainers <sandlot@users.noreply.github.com>",
		Description: "isolated, stateful sandboxes for AI agents\n" +
			"sandlot gives every conversation path of an AI agent its own execution context:\n" +
			"persistent Python, JavaScript and bash kernels, files and commands in an OCI\n" +
			"container (crun or runc) with no network, behind an egress guard that redacts\n" +
			"PII and secrets. Tools over HTTP, MCP and the E2B wire protocol.",
		Homepage: "https://github.com/sandlot/sandlot",
		License:  "Apache-2.0",
		MTime:    cfg.MTime,
		Overridables: nfpm.Overridables{
			Depends:    Depends,
			Recommends: Recommends,
			Suggests:   Suggests,
			Contents:   contents,
			Umask:      0o022,
			Scripts: nfpm.Scripts{
				PostInstall: path("postinst"),
				PreRemove:   path("prerm"),
				PostRemove:  path("postrm"),
			},
			Deb: nfpm.Deb{Compression: cmp.Or(cfg.Compression, "xz")},
		},
	}
	if err := nfpm.PrepareForPackager(nfpm.WithDefaults(info), "deb"); err != nil {
		return fmt.Errorf("deb: %w", err)
	}
	return deb.Default.Package(info, w)
}

// FileName is the package's conventional file name:
// sandlot_0.1.0_amd64.deb.
func FileName(version, arch string) (string, error) {
	v, err := DebianVersion(version)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("sandlot_%s_%s.deb", v, arch), nil
}
