package daemon

import (
	"cmp"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/internal/version"
	"github.com/sandlot/sandlot/store"
)

// BuildVersion is this binary's version, commit and schema version: what
// `sandlot version` prints and /v1/version answers, from one place so the
// two agree.
func BuildVersion() api.Version {
	v := version.Get()
	return api.Version{Version: v.Version, Commit: v.Commit, SchemaVersion: store.SchemaVersion()}
}

// buildVersion is BuildVersion with Config.Version, when set, as the
// version.
func (d *Daemon) buildVersion() api.Version {
	v := BuildVersion()
	v.Version = cmp.Or(d.cfg.Version, v.Version)
	return v
}
