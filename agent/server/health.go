package server

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// HealthAddr is where an agent that is its sandbox's PID 1 answers the
// code interpreter's health check, as E2B's sandboxes do on port 49999
// (http://localhost:49999/health, 200): programs and E2B's own tests look
// there to see that the interpreter is up. sandlot's kernels are the
// agent's, so the agent answering is the interpreter being up.
const HealthAddr = "0.0.0.0:49999"

// serveHealth answers GET /health with 200 on addr until ctx ends. Nothing
// else is served: the listener is reachable by everything in the sandbox,
// so connections are few (8 at once), short and small.
func serveHealth(ctx context.Context, addr string, log *slog.Logger) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		// The port is taken or the sandbox has no network stack: the
		// health check is a courtesy, the agent serves without it.
		log.Info("no health listener", "addr", addr, "err", err)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`"OK"`))
	})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       5 * time.Second,
		WriteTimeout:      5 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    8 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	_ = srv.Serve(netutil.LimitListener(ln, 8))
}
