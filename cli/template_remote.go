package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandlot/sandlot/api"
	"github.com/sandlot/sandlot/client"
	"github.com/sandlot/sandlot/image/dockerignore"
)

// remoteDockerfile is where a Dockerfile from outside the context goes in
// the uploaded tarball.
const remoteDockerfile = ".sandlot.Dockerfile"

// templateBuildRemote builds through a daemon (POST /v1/templates/builds):
// the context directory goes up as a gzip tarball, the build runs there
// (RUN steps in its sandboxes, with its build network), and its log
// streams here as it comes. A failed build is an error (non-zero exit).
func templateBuildRemote(ctx context.Context, std IO, c *client.Client, contextDir string, o templateBuildFlags, out output) error {
	asJSON := out.structured()
	if o.file == "" {
		o.file = filepath.Join(contextDir, "Dockerfile")
	}
	text, err := os.ReadFile(o.file)
	if err != nil {
		return usageErr("template build: %v", err)
	}
	if t := bytes.TrimSpace(text); len(t) > 0 && t[0] == '{' {
		return usageErr("template build: %s is an E2B template; a daemon builds those through the E2B wire (Template.build), /v1 takes Dockerfiles (or build it locally, as the operator, without --url)", o.file)
	}
	dockerfile, extra := "", []byte(nil)
	if rel, err := filepath.Rel(contextDir, o.file); err == nil && filepath.IsLocal(rel) {
		dockerfile = filepath.ToSlash(rel)
	} else {
		dockerfile, extra = remoteDockerfile, text // a Dockerfile from elsewhere travels beside the context
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeContext(pw, contextDir, dockerfile, extra)) }()
	defer pr.Close()
	b, err := c.BuildTemplate(ctx, client.BuildOptions{Name: o.name, Dockerfile: dockerfile, BuildArgs: o.buildArgs}, pr)
	if err != nil {
		return err
	}
	if !asJSON {
		fmt.Fprintf(std.Err, "build %s of %s queued\n", b.BuildID, b.Name)
	}
	done, err := c.WaitTemplateBuild(ctx, b.BuildID, 0, func(l api.TemplateBuildLog) {
		if !asJSON {
			fmt.Fprintln(std.Out, l.Message)
		}
	})
	if asJSON && done != nil {
		out.print(std.Out, done)
	}
	if err != nil {
		return err
	}
	if !asJSON && done.Template != nil {
		fmt.Fprintf(std.Out, "built %s %s %s\n", done.Template.Name, done.Template.ID, done.Template.Image)
	}
	return nil
}

// writeContext writes dir as a gzip tarball: directories, regular files
// and symlinks (as links; the daemon never follows them out of the
// context), and extra (when set) as remoteDockerfile. Other file types
// (sockets, devices, FIFOs) are left out: the daemon refuses them. What
// the context's .dockerignore names stays home, except the Dockerfile
// (dockerfile, context-relative) and the .dockerignore itself, which the
// daemon needs (its COPY leaves out the same paths). An ignored directory
// is walked only when a `!` pattern may take back a path inside it, and
// goes up only before such a path.
func writeContext(w io.Writer, dir, dockerfile string, extra []byte) error {
	ignore, err := dockerignore.Load(os.DirFS(dir))
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	type entry struct {
		path, rel string
		fi        fs.FileInfo
	}
	var pending []entry // ignored directories walked into, outermost first
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		for len(pending) > 0 && !strings.HasPrefix(rel, pending[len(pending)-1].rel+"/") {
			pending = pending[:len(pending)-1]
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if rel != dockerfile && rel != dockerignore.File && ignore.Ignored(rel) {
			switch {
			case !d.IsDir():
				return nil
			case !ignore.Reincludes():
				return filepath.SkipDir
			}
			pending = append(pending, entry{p, rel, fi})
			return nil
		}
		for _, e := range append(pending, entry{p, rel, fi}) {
			if err := writeContextEntry(tw, e.path, e.rel, e.fi); err != nil {
				return err
			}
		}
		pending = pending[:0]
		return nil
	})
	if err != nil {
		return fmt.Errorf("build context %s: %w", dir, err)
	}
	if extra != nil {
		if err := tw.WriteHeader(&tar.Header{Name: remoteDockerfile, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(extra))}); err != nil {
			return err
		}
		if _, err := tw.Write(extra); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// writeContextEntry writes the context's file p (rel inside it) to tw.
func writeContextEntry(tw *tar.Writer, p, rel string, fi fs.FileInfo) error {
	link := ""
	switch {
	case fi.Mode().IsRegular(), fi.IsDir():
	case fi.Mode()&fs.ModeSymlink != 0:
		var err error
		if link, err = os.Readlink(p); err != nil {
			return err
		}
	default:
		return nil
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	hdr.Name = rel
	if fi.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", "" // COPY gives files its own owner
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.CopyN(tw, f, fi.Size())
	return err
}

// remoteBuild tells whether template build talks to a daemon: --url
// given, or $SANDLOT_URL set while no flag of the local build is.
func remoteBuild(urlGiven bool, localFlags []string) (bool, error) {
	switch {
	case urlGiven && len(localFlags) > 0:
		return false, usageErr("template build: --url builds through a daemon; %s belong to the local build (drop --url)", strings.Join(localFlags, ", "))
	case urlGiven:
		return true, nil
	case os.Getenv(envURL) != "" && len(localFlags) == 0:
		return true, nil
	}
	return false, nil
}
