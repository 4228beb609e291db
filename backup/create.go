package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/datadir"
	"github.com/sandlot/sandlot/store"
)

// Config says what Create copies and where to.
type Config struct {
	// DataDir is the daemon's data dir.
	DataDir string
	// StoreURL is the daemon's --store ("": SQLite in DataDir). A Postgres
	// store is refused: pg_dump backs it up.
	StoreURL string
	// Out is the archive to write; it must not exist.
	Out string
	// Sandlot is this binary's version, for the manifest.
	Sandlot string
	// WithoutSecretsKey leaves DATA/secrets-key out.
	WithoutSecretsKey bool
	// ExternalKey: the daemon reads its secrets key from a file outside
	// the data dir or from the environment, so there is none to copy.
	ExternalKey bool
	// Templates adds the images of every template record (ImagesDir, ""
	// is DataDir/images) as templates.tar.
	Templates bool
	ImagesDir string
}

// PostgresAdvice is what Create answers for a Postgres store.
const PostgresAdvice = "the store is Postgres: back it up with pg_dump (pg_dump -Fc -f sandlot.dump 'postgres://…'; pg_restore -d … sandlot.dump to restore), " +
	"and copy from the data dir the files that are state: secrets-key (unless the daemons read the key from --secrets-key-file or $SANDLOT_SECRETS_KEY), " +
	"guard-hmac-key, metrics-token, e2b-secret, e2b-quota.json, api-key and nodes/"

// Create writes the archive of cfg.DataDir's state to cfg.Out, mode 0600,
// and returns its manifest. The database is copied with VACUUM INTO, a
// consistent copy while a daemon writes; the archive appears at Out only
// once it is whole.
func Create(ctx context.Context, cfg Config) (Manifest, error) {
	url := cfg.StoreURL
	if url == "" {
		url = filepath.Join(cfg.DataDir, DatabaseName)
	}
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		return Manifest{}, fmt.Errorf("%s: %w", PostgresAdvice, errdefs.ErrFailedPrecondition)
	}
	dbPath := store.SQLitePath(url)
	if dbPath == "" {
		return Manifest{}, fmt.Errorf("backup: the store %q keeps nothing to back up: %w", url, errdefs.ErrInvalidArgument)
	}
	if _, err := os.Stat(dbPath); err != nil {
		return Manifest{}, fmt.Errorf("backup: no store at %s (is --data-dir the daemon's?): %w", dbPath, errdefs.ErrNotFound)
	}
	if _, err := os.Lstat(cfg.Out); err == nil {
		return Manifest{}, fmt.Errorf("backup: %s exists; name a new file: %w", cfg.Out, errdefs.ErrAlreadyExists)
	}
	stage, err := os.MkdirTemp(filepath.Dir(cfg.Out), ".sandlot-backup-")
	if err != nil {
		return Manifest{}, fmt.Errorf("backup: %w", err)
	}
	defer os.RemoveAll(stage)

	m := Manifest{Format: Format, Sandlot: cfg.Sandlot, CreatedAt: time.Now().UTC().Truncate(time.Second)}
	// sources are the members in archive order, after the manifest.
	sources := map[string]string{}
	var order []string
	add := func(name, path string) { sources[name] = path; order = append(order, name) }
	// addCopy adds a small file of the data dir through a copy in the
	// stage, so its checksum and its bytes in the archive are of one read.
	addCopy := func(name, path string) error {
		b, err := readSmall(path)
		if err != nil {
			return fmt.Errorf("backup: %s: %w", name, err)
		}
		staged := filepath.Join(stage, name)
		if err := os.WriteFile(staged, b, 0o600); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		add(name, staged)
		return nil
	}

	dbCopy := filepath.Join(stage, DatabaseName)
	if err := vacuumInto(ctx, dbPath, dbCopy); err != nil {
		return Manifest{}, err
	}
	sc, err := store.InspectSchema(ctx, dbCopy)
	if err != nil {
		return Manifest{}, err
	}
	m.Schema = sc.Current
	add(DatabaseName, dbCopy)

	keyPath := filepath.Join(cfg.DataDir, datadir.SecretsKey)
	switch _, err := os.Stat(keyPath); {
	case cfg.ExternalKey:
		m.SecretsKey = KeyExternal
	case cfg.WithoutSecretsKey:
		m.SecretsKey = KeyLeftOut
	case err == nil:
		m.SecretsKey = KeyIncluded
		if err := addCopy(datadir.SecretsKey, keyPath); err != nil {
			return Manifest{}, err
		}
	default:
		m.SecretsKey = KeyExternal // no key in the data dir: the daemon never made one there
	}
	m.SecretsKeyNote = keyNotes[m.SecretsKey]
	for _, name := range datadir.StateFiles {
		p := filepath.Join(cfg.DataDir, name)
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			if err := addCopy(name, p); err != nil {
				return Manifest{}, err
			}
		}
	}
	nodes, _ := os.ReadDir(filepath.Join(cfg.DataDir, NodesDir))
	for _, e := range nodes {
		name := NodesDir + "/" + e.Name()
		if e.Type().IsRegular() && nodeRE.MatchString(name) {
			if err := os.MkdirAll(filepath.Join(stage, NodesDir), 0o700); err != nil {
				return Manifest{}, fmt.Errorf("backup: %w", err)
			}
			if err := addCopy(name, filepath.Join(cfg.DataDir, NodesDir, e.Name())); err != nil {
				return Manifest{}, err
			}
		}
	}
	if cfg.Templates {
		imagesDir := cfg.ImagesDir
		if imagesDir == "" {
			imagesDir = filepath.Join(cfg.DataDir, datadir.Images)
		}
		tpl := filepath.Join(stage, TemplatesName)
		if m.Templates, err = exportTemplates(ctx, dbCopy, imagesDir, stage, tpl); err != nil {
			return Manifest{}, err
		}
		add(TemplatesName, tpl)
	}
	for _, name := range order {
		f, err := sumFile(sources[name])
		if err != nil {
			return Manifest{}, fmt.Errorf("backup: %s: %w", name, err)
		}
		f.Name = name
		m.Files = append(m.Files, f)
	}
	if err := writeArchive(cfg.Out, m, order, sources); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// vacuumInto copies the database at src to dst with VACUUM INTO: one read
// transaction, so the copy is the database at one instant, whatever a
// daemon writes meanwhile (WAL lets it write on).
func vacuumInto(ctx context.Context, src, dst string) error {
	db, err := sql.Open("sqlite", src+"?_busy_timeout=10000")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		return fmt.Errorf("backup: copy %s: %w", src, err)
	}
	return nil
}

// readSmall reads a state file of at most smallFileMax bytes.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, smallFileMax+1))
	if err == nil && len(b) > smallFileMax {
		err = fmt.Errorf("larger than %d bytes", smallFileMax)
	}
	return b, err
}

func sumFile(path string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return File{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, err
}

// writeArchive writes the manifest and the members to out: a temporary
// file beside it, synced and renamed, so a failed backup leaves no archive
// that looks whole.
func writeArchive(out string, m Manifest, order []string, sources map[string]string) (err error) {
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".sandlot-backup-*.tmp")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return err
	}
	zw := gzip.NewWriter(tmp)
	tw := tar.NewWriter(zw)
	mtime := m.CreatedAt
	put := func(name string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: size, ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		n, err := io.Copy(tw, r)
		if err == nil && n != size {
			err = fmt.Errorf("%s changed while it was copied", name)
		}
		return err
	}
	if err := put(ManifestName, int64(len(mb)), bytes.NewReader(mb)); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	for i, name := range order {
		f, err := os.Open(sources[name])
		if err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		err = put(name, m.Files[i].Size, io.LimitReader(f, m.Files[i].Size+1))
		f.Close()
		if err != nil {
			return fmt.Errorf("backup: %w", err)
		}
	}
	if err := errors.Join(tw.Close(), zw.Close(), tmp.Sync()); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := os.Link(tmp.Name(), out); err != nil { // fails if out appeared meanwhile
		return fmt.Errorf("backup: %w", err)
	}
	return os.Remove(tmp.Name())
}
