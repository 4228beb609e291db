package oci

import (
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandlot/sandlot/runtime"
)

// TestRemoveShareFiles: deleting a bundle removes the share's files of
// that sandbox its config mounts (its CA bundle, its boot and machine ids)
// and nothing else: not the shared resolv.conf, not a file of the share
// the config does not mount, not a mount source outside the share.
func TestRemoveShareFiles(t *testing.T) {
	r := &Runtime{kind: KindCrun, share: t.TempDir(), log: slog.New(slog.DiscardHandler)}
	sp := &specs.Spec{Linux: &specs.Linux{}}
	net, err := r.networkMounts(t.TempDir(), &runtime.Network{ResolvConf: []byte("nameserver 10.254.0.1\n"), CACerts: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := r.identity(sp)
	if err != nil {
		t.Fatal(err)
	}
	other, err := r.identity(&specs.Spec{Linux: &specs.Linux{}}) // another sandbox's
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "ca-outside")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	sp.Mounts = append(sp.Mounts, net...)
	sp.Mounts = append(sp.Mounts, specs.Mount{Destination: "/x", Type: "bind", Source: outside})
	b, err := json.Marshal(sp)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if len(net) != 2 || len(ids) != 2 {
		t.Fatalf("network mounts %v, id files %v", net, ids)
	}
	cfg, err := readTeardownConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	r.removeShareFiles(cfg.Mounts)

	gone := append([]string{net[1].Source}, ids...) // net[0] is resolv.conf
	for _, f := range gone {
		if _, err := os.Stat(f); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left after delete: %v", f, err)
		}
	}
	for _, f := range append([]string{net[0].Source, outside}, other...) {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s removed: %v", f, err)
		}
	}
}
