// Command sandlot-release makes sandlot's release files (make dist, make
// deb):
//
//	sandlot-release dist -src DIR -out DIR -version V -commit SHA -epoch UNIX [-arch amd64,arm64]
//	sandlot-release deb -dist DIR -version V -epoch UNIX [-arch amd64,arm64] [-doc NAME=PATH ...]
//
// dist cross-builds the binaries with their SBOMs and SHA256SUMS; deb
// packages dist's binaries of each architecture as
// sandlot_VERSION_ARCH.deb in the same directory and writes SHA256SUMS
// again.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandlot/sandlot/release/deb"
	"github.com/sandlot/sandlot/release/dist"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sandlot-release:", err)
		os.Exit(1)
	}
}

type docs map[string]string

func (d docs) String() string { return fmt.Sprint(map[string]string(d)) }
func (d docs) Set(s string) error {
	name, path, ok := strings.Cut(s, "=")
	if !ok {
		return errors.New("want NAME=PATH")
	}
	d[name] = path
	return nil
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: sandlot-release dist|deb [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	src := fs.String("src", "..", "sandlot's module root")
	out := fs.String("out", "dist", "output directory (dist)")
	distDir := fs.String("dist", "dist", "make dist's directory (deb)")
	version := fs.String("version", "", "the release's version (git describe --tags)")
	commit := fs.String("commit", "", "the commit (git rev-parse HEAD)")
	epoch := fs.String("epoch", os.Getenv("SOURCE_DATE_EPOCH"), "SOURCE_DATE_EPOCH: the commit's time, in seconds")
	arches := fs.String("arch", strings.Join(dist.Arches, ","), "architectures, comma-separated")
	d := docs{}
	fs.Var(d, "doc", "NAME=PATH: a file for /usr/share/doc/sandlot (deb; repeated)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	sec, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("-epoch %q: %w", *epoch, err)
	}
	t := time.Unix(sec, 0).UTC()
	archList := strings.Split(*arches, ",")
	switch args[0] {
	case "dist":
		return dist.Build(ctx, dist.Config{Src: *src, Out: *out, Version: *version, Commit: *commit, Epoch: t, Arches: archList, Log: os.Stdout})
	case "deb":
		for _, arch := range archList {
			name, err := deb.FileName(*version, arch)
			if err != nil {
				return err
			}
			path := filepath.Join(*distDir, name)
			if err := writeDeb(path, deb.Config{
				Version: *version, Arch: arch, MTime: t, Docs: d,
				Sandlot:  filepath.Join(*distDir, dist.FileName("sandlot", arch)),
				Agent:    filepath.Join(*distDir, dist.FileName("sandlot-agent", arch)),
				PodAgent: filepath.Join(*distDir, dist.FileName("sandlot-pod-agent", arch)),
			}); err != nil {
				return err
			}
			fmt.Println("packaged", path)
		}
		return dist.WriteSums(*distDir)
	}
	return fmt.Errorf("unknown command %q (dist, deb)", args[0])
}

func writeDeb(path string, cfg deb.Config) error {
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return err
	}
	if err := deb.Build(cfg, f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
