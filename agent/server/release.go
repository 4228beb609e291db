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
// With prune (the release was for a checkpoint that stopped the sandbox,
// agent.ReleaseParams.Stop) the ones moved aside before are removed
// first: the gofer that held them is gone, the restored kernel drops its
// own hold on the unlink, and each wake would otherwise cost one of the
// channel tmpfs's 16 inodes. A removal that fails (the channel still read
// only) is tried again by the next listen.
func moveStale(path string, prune bool) error {
	if prune {
		old, _ := filepath.Glob(path + ".stale-*")
		for _, o := range old {
			if err := os.Remove(o); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove stale socket: %w", err)
			}
		}
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
