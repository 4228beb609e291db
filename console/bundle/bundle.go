// Package bundle builds the web console's assets (package console) from
// their sources, with esbuild's Go API: a module dependency pinned by
// go.sum, so the build needs neither Node.js nor npm. The entry module
// loads the terminal as a chunk of its own the first time it is opened
// (import()), so the page's first load carries only what the lists and
// the editor need.
package bundle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

// Build bundles the sources in web into files by name: index.html as it
// is, main.js and main.css (the entries, at stable names the page links),
// and chunk-<hash>.js for what loads later. The output depends only on
// the sources and esbuild's version.
func Build(web string) (map[string][]byte, error) {
	web, err := filepath.Abs(web)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	out := filepath.Join(filepath.Dir(web), "dist")
	res := api.Build(api.BuildOptions{
		EntryPoints:       []string{filepath.Join(web, "main.ts"), filepath.Join(web, "main.css")},
		Bundle:            true,
		Splitting:         true,
		Format:            api.FormatESModule,
		Target:            api.ES2022,
		Outdir:            out,
		EntryNames:        "[name]",
		ChunkNames:        "chunk-[hash]",
		MinifyWhitespace:  true,
		MinifyIdentifiers: true,
		MinifySyntax:      true,
		LegalComments:     api.LegalCommentsNone,
		Charset:           api.CharsetUTF8,
		Write:             false,
		LogLevel:          api.LogLevelSilent,
	})
	if len(res.Errors) > 0 {
		msgs := api.FormatMessages(res.Errors, api.FormatMessagesOptions{Kind: api.ErrorMessage})
		return nil, errors.New("console: esbuild: " + strings.Join(msgs, "\n"))
	}
	files := map[string][]byte{}
	for _, f := range res.OutputFiles {
		rel, err := filepath.Rel(out, f.Path)
		if err != nil || strings.Contains(rel, string(filepath.Separator)) {
			return nil, fmt.Errorf("console: esbuild wrote %s outside %s", f.Path, out)
		}
		files[rel] = f.Contents
	}
	html, err := os.ReadFile(filepath.Join(web, "index.html"))
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	files["index.html"] = html
	return files, nil
}
