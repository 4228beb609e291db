package daemon

import (
	"crypto/tls"
	"fmt"
	"net"

	"github.com/sandlot/sandlot/errdefs"
)

// ListenTLS is the front door's second listener (serve's --tls-addr):
// E2B's SDKs reach a sandbox's ports and envd at
// https://<port>-<sandboxId>.<domain>, so a daemon that hands out a domain
// needs TLS on that name. The operator gives a certificate for *.<domain>
// (a public CA's or their own, which clients then trust). The pair is read
// once: a renewed certificate takes a restart.
func ListenTLS(addr, certFile, keyFile string) (net.Listener, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %v: %w", certFile, keyFile, err, errdefs.ErrInvalidArgument)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %v: %w", addr, err, errdefs.ErrUnavailable)
	}
	// HTTP/1.1 only, as on the plain listener: a sandbox port's WebSocket
	// upgrade passes through the reverse proxy, which HTTP/2 cannot carry.
	return tls.NewListener(ln, &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	}), nil
}
