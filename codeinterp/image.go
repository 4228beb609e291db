// Package codeinterp is the `code-interpreter` template: the default
// template's packages plus R (r-base-core) and a JDK (default-jdk-headless,
// for jshell), built from Debian's mirror like the default base, so the
// agent's r and java kernels have their interpreters. The default template
// stays without them: it is built at the daemon's first start and every
// sandbox that names no template uses it, so it is kept small and quick to
// build (docs/images.md).
package codeinterp

import (
	"context"
	"log/slog"
	"slices"

	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/image/debian"
	"github.com/sandlot/sandlot/templates"
)

// Template is the template's name; E2B's "code-interpreter" names it too.
const Template = templates.CodeInterpreter

// Extra is what the image holds beyond the default template's packages:
// Rscript at /usr/bin/Rscript and java (with the jdk.jshell module) at
// /usr/bin/java.
var Extra = []string{"r-base-core", "default-jdk-headless"}

// manDirs makes the manual directories the image leaves out (debian's
// path-exclude): the JDK's postinst registers its manual pages with
// update-alternatives, which fails when /usr/share/man/man1 is missing.
const manDirs = `mkdir -p "$1/usr/share/man/man1"`

// ImageConfig is the image's recipe (cache key included).
func ImageConfig() debian.Config {
	return debian.Config{Packages: append(slices.Clone(debian.DefaultPackages), Extra...), Essential: []string{manDirs}}
}

// NewBuilder returns the image's builder over store: the template is
// built from Debian's mirror when a sandbox first asks for it
// (debian.Builder.Missing), and cached in the store.
func NewBuilder(ctx context.Context, store *image.Store, log *slog.Logger) *debian.Builder {
	return debian.NewBuilder(ctx, store, Template, ImageConfig(), log)
}
