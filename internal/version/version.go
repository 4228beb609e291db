// Package version is the one owner of the build's version: what a release
// links in (make dist, make build: -X .../internal/version.version and
// .commit), else what the Go toolchain records in the binary's build info
// (`go install module@v1.2.3` records the module version; `go build` in a
// git checkout records the VCS revision and, since Go 1.24, a version made
// of the tag or a pseudo-version), else "devel". `sandlot --version`,
// /v1/version, the landing page and MCP's serverInfo all read it here.
package version

import (
	"regexp"
	"runtime/debug"
	"strings"
)

// Set when the binary is linked: -ldflags "-X
// github.com/sandlot/sandlot/internal/version.version=v1.2.3 -X
// github.com/sandlot/sandlot/internal/version.commit=<sha>".
var version, commit string

// Info is the build's version and the commit it was built from.
type Info struct {
	// Version is a release tag (v1.2.3), a `git describe` of a build
	// between tags (v1.2.3-4-gabcdef1), a Go pseudo-version, or "devel"
	// ("devel-<commit>" when only the revision is known); "-dirty" or
	// "+dirty" when the tree had uncommitted changes.
	Version string
	// Commit is the full revision, "" when the build recorded none (a
	// `go install module@tag` of a tagged release from the module proxy,
	// which carries no VCS information).
	Commit string
}

// Get returns this binary's Info.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return resolve(version, commit, bi)
}

// String is Get().Version.
func String() string { return Get().Version }

// pseudo matches a Go pseudo-version's last two parts: the UTC time and
// the 12-digit revision prefix (vX.0.0-20261129074040-9eb770d1a2b3, or
// vX.Y.Z-pre.0.20261129074040-9eb770d1a2b3), optionally +dirty.
var pseudo = regexp.MustCompile(`[.-]\d{14}-([0-9a-f]{12})(\+dirty)?$`)

// resolve picks the version from the linked values first, then bi (nil
// when the binary has no build info).
func resolve(linkedVersion, linkedCommit string, bi *debug.BuildInfo) Info {
	var rev string
	dirty := false
	mainVersion := ""
	if bi != nil {
		if v := bi.Main.Version; v != "(devel)" {
			mainVersion = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	info := Info{Version: linkedVersion, Commit: linkedCommit}
	if info.Commit == "" {
		info.Commit = rev
	}
	if info.Commit == "" {
		// A pseudo-version names its commit (12 digits) even where the
		// module proxy's build carries no VCS settings.
		if m := pseudo.FindStringSubmatch(mainVersion); m != nil {
			info.Commit = m[1]
		}
	}
	switch {
	case info.Version != "":
	case mainVersion != "":
		info.Version = mainVersion
	case rev != "":
		info.Version = "devel-" + rev[:min(12, len(rev))]
		if dirty {
			info.Version += "-dirty"
		}
	default:
		info.Version = "devel"
	}
	info.Version = strings.TrimSpace(info.Version)
	return info
}
