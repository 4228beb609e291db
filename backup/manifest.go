// Package backup copies a data dir's state into one archive and brings it
// back (sandlot backup, sandlot restore). The archive is a gzipped tar
// whose first member, manifest.json, names every other member with its
// size and SHA-256, the sandlot version and the schema version of the
// database; the members are the SQLite store (an online copy made with
// VACUUM INTO, consistent while a daemon runs), the secrets key unless
// left out, the daemon's other state files (datadir.StateFiles), and with
// Templates the images of every template record as one OCI layout
// tarball. The node ids of DATA/nodes/ come along, so a daemon restored on
// the same state dir path is the node it was.
//
// An archive is hostile input to Restore: only the names a manifest may
// hold are written, each once, as a regular file under the target dir
// (through os.Root), of exactly the size the manifest says and no larger
// than the limits, and checked against its SHA-256 before anything in the
// target changes. docs/operations.md says what an operator does with it.
package backup

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/datadir"
)

// Format is the archive layout's version: Restore refuses others.
const Format = 1

// The members besides the state files.
const (
	ManifestName  = "manifest.json"
	DatabaseName  = datadir.Database
	TemplatesName = "templates.tar"
)

// Secrets key notes, in Manifest.SecretsKey.
const (
	KeyIncluded = "included"
	KeyLeftOut  = "left out"
	KeyExternal = "external"
)

// keyNotes are Manifest.SecretsKeyNote.
var keyNotes = map[string]string{
	KeyIncluded: "the secrets key is in this archive (secrets-key, 32 bytes, in the clear): it opens every tenant secret in sandlot.db. " +
		"The archive is written 0600 and not encrypted; keep it as the data dir",
	KeyLeftOut: "the secrets key was left out: restore it as DATA/secrets-key (0600) or give serve --secrets-key-file, or the stored secrets do not open",
	KeyExternal: "the daemon reads its secrets key from --secrets-key-file or $SANDLOT_SECRETS_KEY, outside the data dir: it is not in this archive, " +
		"and the restored daemon needs it",
}

// Manifest describes an archive.
type Manifest struct {
	Format int `json:"format"`
	// Sandlot is the version of the sandlot that made it.
	Sandlot   string    `json:"sandlot"`
	CreatedAt time.Time `json:"createdAt"`
	// Schema is the database's schema version.
	Schema int `json:"schema"`
	// SecretsKey says whether the secrets key is a member: included, left
	// out (by request), or external (the daemon reads it from a file
	// outside the data dir or the environment; it is not in the archive).
	SecretsKey string `json:"secretsKey"`
	// SecretsKeyNote says the same in words, and how the key is protected.
	SecretsKeyNote string `json:"secretsKeyNote"`
	// Templates lists the template records whose images templates.tar
	// holds (empty without Config.Templates).
	Templates []Template `json:"templates,omitempty"`
	Files     []File     `json:"files"`
}

// Template is one template record whose image is in the archive.
type Template struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant,omitempty"`
	Name   string `json:"name"`
	Image  string `json:"image"`
}

// File is one member.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// smallFileMax bounds the key and state files; the database and the
// templates are bounded by RestoreConfig.MaxBytes.
const smallFileMax = 1 << 20

// manifestMax bounds manifest.json.
const manifestMax = 1 << 20

// allowed are the member names a manifest may hold besides the node ids,
// each with its size bound (0: RestoreConfig.MaxBytes).
func allowed() map[string]int64 {
	m := map[string]int64{DatabaseName: 0, TemplatesName: 0, datadir.SecretsKey: smallFileMax}
	for _, f := range datadir.StateFiles {
		m[f] = smallFileMax
	}
	return m
}

var hexRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// NodesDir holds the data dir's node ids, one file per state dir
// (daemon.resolveNode): restored, a daemon on the same state dir path is
// the same node, so the records it served are its own again.
const NodesDir = datadir.Nodes

// nodeRE is the name of a node id file in the archive.
var nodeRE = regexp.MustCompile(`^nodes/[0-9a-f]{16}$`)

// limitOf is the size bound of a member name, and whether a manifest may
// name it at all.
func limitOf(name string, maxBytes int64) (int64, bool) {
	if nodeRE.MatchString(name) {
		return smallFileMax, true
	}
	limit, ok := allowed()[name]
	if ok && limit == 0 {
		limit = maxBytes
	}
	return limit, ok
}

// parseManifest reads and checks a manifest: its format, and files whose
// names are allowed, each once, with sizes within the bounds (maxBytes for
// the database and the templates) and well-formed checksums.
func parseManifest(b []byte, maxBytes int64) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("backup: manifest: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	if m.Format != Format {
		return m, fmt.Errorf("backup: archive format %d, this sandlot reads %d: %w", m.Format, Format, errdefs.ErrInvalidArgument)
	}
	seen := map[string]bool{}
	hasDB := false
	for _, f := range m.Files {
		limit, known := limitOf(f.Name, maxBytes)
		if !known {
			return m, fmt.Errorf("backup: the manifest names %q, which is no file of a data dir: %w", f.Name, errdefs.ErrInvalidArgument)
		}
		if seen[f.Name] {
			return m, fmt.Errorf("backup: the manifest names %q twice: %w", f.Name, errdefs.ErrInvalidArgument)
		}
		seen[f.Name] = true
		if f.Size < 0 || f.Size > limit {
			return m, fmt.Errorf("backup: %s is %d bytes, over the %d allowed: %w", f.Name, f.Size, limit, errdefs.ErrInvalidArgument)
		}
		if !hexRE.MatchString(f.SHA256) {
			return m, fmt.Errorf("backup: %s: malformed checksum: %w", f.Name, errdefs.ErrInvalidArgument)
		}
		hasDB = hasDB || f.Name == DatabaseName
	}
	if !hasDB {
		return m, fmt.Errorf("backup: the archive holds no database: %w", errdefs.ErrInvalidArgument)
	}
	return m, nil
}
