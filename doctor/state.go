package doctor

import (
	"context"
	"errors"
	"fmt"
	"github.com/sandlot/sandlot/errdefs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/image"
	"github.com/sandlot/sandlot/store"
)

// checkDisk looks at the file system the data dir is on (or will be, when
// it does not exist yet): its free space, and whether a file can be
// written there.
func checkDisk(_ context.Context, cfg Config) []Result {
	r := Result{Name: "disk", Required: true}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		r.Status, r.Detail = Fail, err.Error()
		return []Result{r}
	}
	at := dir
	for {
		if _, err := os.Stat(at); err == nil || at == "/" {
			break
		}
		at = filepath.Dir(at)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(at, &st); err != nil {
		r.Status, r.Detail, r.Fix = Fail, "cannot read the file system of "+at+": "+err.Error(), "check --data-dir"
		return []Result{r}
	}
	free := int64(st.Bavail) * st.Bsize
	where := "data dir " + dir
	if at != dir {
		where += " (not made yet; " + at + ")"
	}
	r.Detail = fmt.Sprintf("%s: %s free", where, size(free))
	if at == dir {
		if err := writeProbe(dir); err != nil {
			r.Status, r.Detail = Fail, fmt.Sprintf("%s: cannot write there: %v", where, err)
			r.Fix = "free space in " + dir + " or move --data-dir to a larger file system; it must be writable by root"
			return []Result{r}
		}
	}
	switch {
	case free < cfg.MinFreeBytes:
		r.Status = Fail
		r.Detail += fmt.Sprintf(", under the %s the store, the images and the default template need", size(cfg.MinFreeBytes))
		r.Fix = "free space there or move --data-dir to a larger file system"
	case free < 4*cfg.MinFreeBytes:
		r.Status, r.Required = Warn, false
		r.Detail += fmt.Sprintf(", under %s: templates and builds may not fit", size(4*cfg.MinFreeBytes))
		r.Fix = "free space there or move --data-dir to a larger file system"
	default:
		r.Status = OK
	}
	return []Result{r}
}

// writeProbe writes and removes a small file in dir.
func writeProbe(dir string) error {
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(make([]byte, 64<<10))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// storeURL is serve's: --store, or the SQLite file in the data dir.
func (cfg Config) storeURL() string {
	if cfg.StoreURL != "" {
		return cfg.StoreURL
	}
	abs, err := filepath.Abs(filepath.Join(cfg.DataDir, "sandlot.db"))
	if err != nil {
		abs = filepath.Join(cfg.DataDir, "sandlot.db")
	}
	return "sqlite://" + abs
}

// checkStore opens the store read-only and compares its schema with this
// binary's.
func checkStore(ctx context.Context, cfg Config) []Result {
	r := Result{Name: "store", Required: true}
	url := cfg.storeURL()
	if url == "memory:" || url == "memory" {
		r.Status, r.Detail = OK, "memory store: nothing is kept across restarts"
		return []Result{r}
	}
	where := url
	if p := store.SQLitePath(url); p != "" {
		where = p
	} else {
		where = "postgres"
	}
	s, err := store.InspectSchema(ctx, url)
	switch {
	case err != nil:
		r.Status, r.Detail = Fail, "cannot open "+where+": "+errdefs.Message(err.Error())
		r.Fix = "check --store (the URL, the server, the password) or the data dir's permissions"
	case s.Err() != nil:
		r.Status, r.Detail = Fail, where+": "+errdefs.Message(s.Err().Error())
		r.Fix = "install the sandlot release that migrated it (or a later one)"
	case !s.Exists:
		r.Status, r.Detail = OK, fmt.Sprintf("%s does not exist yet; the first start makes it at schema %d", where, s.Latest)
	case len(s.Pending) > 0:
		var names []string
		for _, m := range s.Pending {
			names = append(names, m.Name)
		}
		r.Status, r.Required = Warn, false
		r.Detail = fmt.Sprintf("%s is at schema %d, this sandlot's is %d: starting it applies %s", where, s.Current, s.Latest, strings.Join(names, ", "))
		r.Fix = "back it up first (sandlot backup), then sandlot migrate, or let serve migrate at start"
	default:
		r.Status, r.Detail = OK, fmt.Sprintf("%s at schema %d, this sandlot's", where, s.Current)
	}
	return []Result{r}
}

// checkTemplate looks for the default template's image in the image store
// and, when it is not built yet, for what builds it.
func checkTemplate(ctx context.Context, cfg Config) []Result {
	r := Result{Name: "default template", Required: true}
	if cfg.DefaultImage == "none" {
		r.Status, r.Required, r.Detail = OK, false, "--default-image none: an operator names an image \"default\""
		return []Result{r}
	}
	if _, err := os.Stat(filepath.Join(cfg.ImagesDir, "refs.json")); err == nil {
		imgs, err := image.Open(cfg.ImagesDir, image.Config{})
		if err == nil {
			var d fmt.Stringer
			if d, err = imgs.Resolve(ctx, "default"); err == nil {
				r.Status, r.Detail = OK, "built, "+d.String()[:19]+"… in "+cfg.ImagesDir
				return []Result{r}
			}
		}
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			r.Status, r.Detail, r.Fix = Fail, "cannot read the image store "+cfg.ImagesDir+": "+err.Error(), "check --images-dir and its permissions"
			return []Result{r}
		}
	}
	if bin, ok := cfg.lookPath("mmdebstrap"); ok {
		r.Status, r.Required = Warn, false
		r.Detail = "not built yet in " + cfg.ImagesDir + "; the first start builds it with " + bin + " from the Debian mirror (minutes)"
		r.Fix = "let the first start build it, with deb.debian.org (or your mirror) reachable"
		return []Result{r}
	}
	r.Status = Fail
	r.Detail = "not built in " + cfg.ImagesDir + ", and no mmdebstrap in PATH to build it"
	r.Fix = "apt-get install mmdebstrap, or run with --default-image none and name an image \"default\" yourself (sandlot template pull)"
	return []Result{r}
}
