package cli

import (
	"fmt"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/daemon"
	"github.com/sandlot/sandlot/internal/version"
)

// Version is this binary's version (internal/version owns it: a release's
// linked tag, else the Go build info's module version or commit).
func Version() string { return version.String() }

// versionLine is what `sandlot --version` and `sandlot version` print:
// the fields of /v1/version on one line.
func versionLine(v api.Version) string {
	commit := v.Commit
	if commit == "" {
		commit = "unknown"
	}
	return fmt.Sprintf("sandlot %s (commit %s, schema %d)\n", v.Version, commit, v.SchemaVersion)
}

// buildVersion is daemon.BuildVersion, the one the daemon serves at
// /v1/version.
func buildVersion() api.Version { return daemon.BuildVersion() }
