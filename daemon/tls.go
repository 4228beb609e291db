package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"

	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/internal/logkey"
)

// tlsListener is the front door's second listener, --tls-addr: E2B's SDKs
// reach a sandbox's ports and envd at https://<port>-<sandboxId>.<domain>,
// so a daemon that hands out a domain needs TLS on that name. The
// operator gives a certificate for *.<domain> (a public CA's or their
// own, which clients then trust). nil when --tls-addr is unset. The pair
// is read once: a renewed certificate takes a restart.
func tlsListener(cfg serveConfig) (net.Listener, error) {
	if cfg.tlsAddr == "" {
		if cfg.tlsCert != "" || cfg.tlsKey != "" {
			return nil, usageErr("--tls-cert and --tls-key need --tls-addr")
		}
		return nil, nil
	}
	if cfg.tlsCert == "" || cfg.tlsKey == "" {
		return nil, usageErr("--tls-addr needs --tls-cert and --tls-key")
	}
	cert, err := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %v: %w", cfg.tlsCert, cfg.tlsKey, err, errdefs.ErrInvalidArgument)
	}
	ln, err := net.Listen("tcp", cfg.tlsAddr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %v: %w", cfg.tlsAddr, err, errdefs.ErrUnavailable)
	}
	// HTTP/1.1 only, as on the plain listener: a sandbox port's WebSocket
	// upgrade passes through the reverse proxy, which HTTP/2 cannot carry.
	return tls.NewListener(ln, &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	}), nil
}

// serveTLS serves srv on ln (when not nil) until ctx ends; its error, if
// the listener fails early, is logged: the plain listener keeps serving.
func serveTLS(ctx context.Context, srv *server.Server, ln net.Listener, log *slog.Logger) (wait func()) {
	if ln == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, ln); err != nil {
			log.Error("TLS listener stopped", slog.String(logkey.Addr, ln.Addr().String()), slog.String(logkey.Err, err.Error()))
		}
	}()
	return func() { <-done }
}
