package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/sandlot/sandlot/agent"
)

// listenPod opens the pod channel (agent/channel.go): TCP, the TLS of
// Config.PodTLS, and the bound handshake with the pod's keys.
func (s *Server) listenPod() (net.Listener, func(net.Conn) (net.Conn, error), error) {
	if s.cfg.Pod == nil || s.cfg.PodTLS == nil {
		return nil, nil, errors.New("pod channel: no keys or no TLS")
	}
	ln := s.cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.cfg.Listen); err != nil {
			return nil, nil, fmt.Errorf("listen: %w", err)
		}
	}
	accept := func(c net.Conn) (net.Conn, error) {
		tc := s.cfg.PodTLS(c)
		enrolled, serve, err := s.cfg.Pod.Accept(tc, s.enroll)
		if err != nil {
			return nil, err
		}
		if enrolled {
			s.log.Info("enrolled: the sandbox key replaced the pool key", "session", serve)
			if !serve {
				return nil, nil
			}
		}
		return tc, nil
	}
	return ln, accept, nil
}

// enroll applies an enrollment's configuration: its environment joins the
// base environment (as env.set does), and its CA certificates the trust
// store the usual variables point at.
func (s *Server) enroll(e agent.Enrollment) error {
	env := e.Env
	if len(e.CACerts) > 0 {
		path, err := writeCABundle(e.CACerts)
		if err != nil {
			return err
		}
		env = make(map[string]string, len(e.Env)+len(agent.CAEnv))
		for _, k := range agent.CAEnv {
			env[k] = path
		}
		for k, v := range e.Env {
			env[k] = v
		}
	}
	if len(env) == 0 {
		return nil
	}
	return s.setEnv(env)
}

// systemBundles are where images keep their CA bundle.
var systemBundles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"}

// writeCABundle writes the image's system bundle plus extra to a file in
// the temporary directory (a pod's root is read-only) and returns its path.
func writeCABundle(extra []byte) (string, error) {
	var bundle []byte
	for _, p := range systemBundles {
		if b, err := os.ReadFile(p); err == nil {
			bundle = append(b, '\n')
			break
		}
	}
	bundle = append(bundle, extra...)
	dir := filepath.Join(os.TempDir(), ".sandlot")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("ca bundle: %w", err)
	}
	path := filepath.Join(dir, "ca-bundle.pem")
	if err := os.WriteFile(path, bundle, 0o644); err != nil {
		return "", fmt.Errorf("ca bundle: %w", err)
	}
	return path, nil
}
