package cli

import (
	"runtime/debug"
)

// version is set when the binary is linked (Makefile: git describe):
// -ldflags "-X github.com/sandlot/sandlot/cli.version=v1.2.3".
var version string

// Version is the version of this binary: the one linked in, else the
// module version `go install` records, else the VCS revision `go build`
// records (with -dirty for uncommitted changes), else "devel".
func Version() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	return "devel-" + rev[:min(12, len(rev))] + dirty
}
