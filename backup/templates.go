package backup

import (
	"context"
	"fmt"

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
