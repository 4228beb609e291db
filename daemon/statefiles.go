package daemon

// SecretsKeyFile is the data dir's secrets key (SecretsKey): the key that
// opens every tenant secret in the store.
const SecretsKeyFile = secretsKeyFile

// StateFiles are the files of the data dir, besides the SQLite store and
// the secrets key, that a restart must find again for the daemon to be
// the same one: the guard's HMAC key (findings keep matching earlier
// ones), the metrics token and the E2B token secret (scrapers and issued
// tokens keep working), the E2B plan's usage, and the first tenant's API
// key file that serve writes for the CLI. sandlot backup copies them.
// The node ids of nodes/ go too (backup.NodesDir); what is left out is
// rebuilt or belongs to the host: images/ (templates' images are
// exported by digest), net/ (sandbox networks).
var StateFiles = []string{guardKeyFile, metricsTokenFile, e2bSecretFile, e2bQuotaFile, APIKeyFile}

// APIKeyFile is the first tenant's API key that serve writes into the
// data dir at first start, 0600, for the CLI on the same host.
const APIKeyFile = "api-key"
