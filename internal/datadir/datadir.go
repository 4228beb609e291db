// Package datadir names the files of a sandlot data dir that are state:
// the daemon makes them, sandlot backup copies them and sandlot restore
// accepts them and nothing else. One list, so that a new state file is
// backed up by being named here; the daemon's test holds its own names to
// these (daemon.TestDataDirNames).
package datadir

// The files and dirs of a data dir.
const (
	// Database is the SQLite store.
	Database = "sandlot.db"
	// SecretsKey seals tenants' secrets in the store (docs/network.md).
	SecretsKey = "secrets-key"
	// GuardKey keys the HMACs of guard findings, so a value keeps its
	// HMAC across restarts.
	GuardKey = "guard-hmac-key"
	// MetricsToken is the bearer token /metrics requires.
	MetricsToken = "metrics-token"
	// E2BSecret signs E2B access tokens.
	E2BSecret = "e2b-secret"
	// E2BQuota is the E2B plan's usage so far.
	E2BQuota = "e2b-quota.json"
	// APIKey is the first tenant's API key, written at first start for
	// the CLI on the same host.
	APIKey = "api-key"
	// Nodes holds one node id file per state dir.
	Nodes = "nodes"
	// Images is the default image store.
	Images = "images"
	// Volumes holds the tenants' volumes, a file each (docs/volumes.md).
	// Backups leave it out: a backup restores volumes' records, not their
	// bytes.
	Volumes = "volumes"
)

// StateFiles are the files, besides the store and the secrets key, that a
// restart must find again for the daemon to be the same one: findings'
// HMACs keep matching, scrapers and issued E2B tokens keep working, the
// plan's usage and the CLI's key stay.
var StateFiles = []string{GuardKey, MetricsToken, E2BSecret, E2BQuota, APIKey}
