package daemon

import (
	"testing"

	"github.com/sandlot/sandlot/internal/datadir"
)

// TestDataDirNames: the files the daemon keeps in its data dir are the
// ones internal/datadir names, which sandlot backup copies and restore
// accepts; a file renamed here and not there would drop out of backups.
func TestDataDirNames(t *testing.T) {
	for _, tc := range []struct{ daemon, datadir string }{
		{secretsKeyFile, datadir.SecretsKey},
		{guardKeyFile, datadir.GuardKey},
		{metricsTokenFile, datadir.MetricsToken},
		{e2bSecretFile, datadir.E2BSecret},
		{e2bQuotaFile, datadir.E2BQuota},
		{nodesDir, datadir.Nodes},
	} {
		if tc.daemon != tc.datadir {
			t.Errorf("the daemon keeps %q, internal/datadir names %q", tc.daemon, tc.datadir)
		}
	}
}
