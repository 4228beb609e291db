package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandlot/sandlot/agent"
)

// TestRekey attacks the key a fork with memory would share with its
// source: the restored agent holds the source's key until the host gives
// it the fork's (channel.rekey). After the rekey the old key is refused and
// the new one served; a plain (unsealed) session cannot rekey, so neither a
// relay nor a host without the seal chooses the key; a bad key is refused.
func TestRekey(t *testing.T) {
	dir := t.TempDir()
	bin := buildStatic(t, dir)
	sock := filepath.Join(dir, "agent.sock")
	old := []byte("0123456789abcdef0123456789abcdef")
	fresh := []byte("fedcba9876543210fedcba9876543210")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pw.Write(old)
	pw.Close()
	cmd := exec.Command(bin, "--socket", sock, "--home", filepath.Join(dir, "home"), "--key-fd", "3")
	cmd.ExtraFiles = []*os.File{pr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial := func(key []byte, sealed bool) (*agent.Client, error) {
		c, err := agent.Dial(ctx, sock, agent.ClientConfig{SandboxID: "rekey", Key: key, Sealed: sealed})
		if err != nil {
			return nil, err
		}
		if _, err := c.PingInfo(ctx); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	var plain *agent.Client
	for i := 0; i < 500; i++ {
		if plain, err = dial(old, false); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.Rekey(ctx, fresh); err == nil {
		t.Fatal("a plain session rekeyed the agent")
	}
	sealed, err := dial(old, true)
	if err != nil {
		t.Fatal(err)
	}
	defer sealed.Close()
	for _, bad := range [][]byte{nil, []byte("short")} {
		if err := sealed.Rekey(ctx, bad); err == nil {
			t.Errorf("rekey to %q accepted", bad)
		}
	}
	if c, err := dial(old, false); err != nil {
		t.Fatalf("the old key is refused before any rekey: %v", err)
	} else {
		c.Close()
	}
	if err := sealed.Rekey(ctx, fresh); err != nil {
		t.Fatalf("rekey over a sealed session: %v", err)
	}
	for _, sealed := range []bool{false, true} {
		if c, err := dial(old, sealed); err == nil {
			c.Close()
			t.Errorf("sealed=%v: the agent accepts its old key after the rekey", sealed)
		}
		c, err := dial(fresh, sealed)
		if err != nil {
			t.Fatalf("sealed=%v: the new key is refused: %v", sealed, err)
		}
		c.Close()
	}
	// The session that rekeyed goes on.
	if _, err := sealed.PingInfo(ctx); err != nil {
		t.Fatalf("the rekeying session after the rekey: %v", err)
	}
}
