package backup

import (
	"archive/tar"
	"context"
	"database/sql"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/source"
)

// importTemplates puts the images of templates.tar into the image store
// through the importer tenants' archives go through (untrusted: every
// blob proved against its digest), and checks that every template the
// manifest names has its image back.
func importTemplates(ctx context.Context, archive, imagesDir string, want []Template) error {
	imgs, err := image.Open(imagesDir, image.Config{})
	if err != nil {
		return fmt.Errorf("restore: image store: %w", err)
	}
	got, err := source.ImportFile(ctx, imgs, archive, source.ImportOptions{Untrusted: true})
	if err != nil {
		return fmt.Errorf("restore: templates: %w", err)
	}
	have := map[string]bool{}
	for _, g := range got {
		have[g.Digest.String()] = true
	}
	for _, t := range want {
		if !have[t.Image] {
			return fmt.Errorf("restore: template %s: its image %s is not in the archive: %w", t.Name, t.Image, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

// exportTemplates writes the image of every template record of the
// database at db into an OCI layout tarball at out.
func exportTemplates(ctx context.Context, db, imagesDir, stage, out string) ([]Template, error) {
	conn, err := sql.Open("sqlite", db+"?_query_only=1")
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, `SELECT id, COALESCE(tenant_id, ''), name, image FROM templates ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("backup: templates: %w", err)
	}
	var tpls []Template
	for rows.Next() {
		var t Template
		if err := rows.Scan(&t.ID, &t.Tenant, &t.Name, &t.Image); err != nil {
			rows.Close()
			return nil, fmt.Errorf("backup: templates: %w", err)
		}
		tpls = append(tpls, t)
	}
	rows.Close()
	dir := filepath.Join(stage, "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	done := map[string]bool{}
	if len(tpls) > 0 {
		imgs, err := image.Open(imagesDir, image.Config{})
		if err != nil {
			return nil, fmt.Errorf("backup: image store: %w", err)
		}
		for _, t := range tpls {
			if done[t.Image] {
				continue
			}
			done[t.Image] = true
			h, err := v1.NewHash(t.Image)
			if err != nil {
				return nil, fmt.Errorf("backup: template %s: image %q: %w", t.Name, t.Image, err)
			}
			img, err := imgs.V1(ctx, h)
			if err != nil {
				return nil, fmt.Errorf("backup: template %s: its image is not in %s: %w", t.Name, imagesDir, err)
			}
			if err := p.AppendImage(img); err != nil {
				return nil, fmt.Errorf("backup: template %s: %w", t.Name, err)
			}
		}
	}
	return tpls, tarDir(dir, out)
}

// tarDir writes the regular files under dir into a tar at out, with names
// relative to dir.
func tarDir(dir, out string) error {
	f, err := os.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		fi, err := src.Stat()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: fi.Size(), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return fmt.Errorf("backup: templates: %w", err)
	}
	return f.Close()
}
