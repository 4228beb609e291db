package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sandlot/sandlot/agent"
	"github.com/sandlot/sandlot/internal/logkey"
)

// Releasing the channel (agent.MethodRelease). Under gVisor the agent's
// listener is a socket bound on the host (runsc's --host-uds=create), and
// runsc checkpoint refuses a sandbox holding one ("Cannot save endpoint
// with bound host socket"). So the host asks the agent to let go: after
// its answer the agent closes the listener and every connection, keeps
// everything else (kernels, processes, detached execs), and tries to
// listen again every relistenEvery. The host's channel directory is
// sealed read-only by then, so no bind succeeds until the host opens it:
// after the checkpoint (the sandbox runs on) or in the restored sandbox.

// relistenEvery is how often a released agent tries to listen again; it
// bounds what a restore waits for the agent on top of runsc's own work.
const relistenEvery = 2 * time.Millisecond

// serveListener accepts and serves connections on ln until ctx ends or
// the channel is released; either way it closes ln and every connection
// it accepted. Connections' goroutines count in wg.
func (s *Server) serveListener(ctx context.Context, ln net.Listener, accept func(net.Conn) (net.Conn, error), wg *sync.WaitGroup) {
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	stop := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-s.released:
		}
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
		close(stop)
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			select {
			case <-stop:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.log.Error("accept", logkey.Err, err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		mu.Lock()
		if conns == nil { // released meanwhile
			mu.Unlock()
			c.Close()
			continue
		}
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
			}()
			sc, err := accept(c)
			if err != nil {
				s.log.Warn("connection refused", logkey.Err, err)
				c.Close()
				return
			}
			if sc == nil { // done: an enrollment
				c.Close()
				return
			}
			s.serveConn(ctx, sc)
		}()
	}
}

// relisten listens again after a release, trying every relistenEvery
// until it can or ctx ends.
func (s *Server) relisten(ctx context.Context) (net.Listener, func(net.Conn) (net.Conn, error), error) {
	t := time.NewTicker(relistenEvery)
	defer t.Stop()
	for tries := 0; ; tries++ {
		ln, accept, err := s.listen()
		if err == nil {
			s.log.Info("agent listening again", "address", ln.Addr().String(), "tries", tries)
			return ln, accept, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-t.C:
		}
	}
}

// release lets go of the channel once the answer to the call that asked
// for it is written (conn.serve).
func (s *Server) release() {
	select {
	case s.released <- struct{}{}:
	default: // one is pending already
	}
}

// restoredMark, in the channel directory, is the host's word that the
// sandbox was restored from a checkpoint that stopped it (runtime/oci
// Restore).
const restoredMark = "restored"

// isRelease reports whether req asks for a release.
func isRelease(req *agent.Request) bool { return req.Method == agent.MethodRelease }

// moveStale moves aside a socket left at path by a listener before a
// release, under a name of its own, instead of removing it. Under gVisor
// the gofer may still hold the old socket's file (a sandbox that runs on
// after a fork's checkpoint keeps its gofer): removed, it would be a file
// deleted while in use, and the host could no longer seal the channel's
// tmpfs (a read-only remount fails with EBUSY while one exists). A
// renamed file is not deleted.
//
// After a restore (the host leaves restoredMark in the channel before it)
// the ones moved aside earlier are removed: each wake with memory would
// move one more, and the channel's tmpfs has 16 inodes. The restore
// started a new gofer, which holds them no more than the sandbox's kernel
// does (it drops its own on the unlink). After a fork's checkpoint there
// is no mark: the source's gofer, the same, may hold them.
func moveStale(path string) error {
	mark := filepath.Join(filepath.Dir(path), restoredMark)
	if _, err := os.Lstat(mark); err == nil {
		old, _ := filepath.Glob(path + ".stale-*")
		for _, o := range old {
			_ = os.Remove(o)
		}
		_ = os.Remove(mark)
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var b [8]byte
	rand.Read(b[:])
	if err := os.Rename(path, path+".stale-"+hex.EncodeToString(b[:])); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("move stale socket: %w", err)
	}
	return nil
}
