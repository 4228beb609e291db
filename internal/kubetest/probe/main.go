// Command probe is the test cluster's one tiny image: `probe pause` is the
// node's pod sandbox (pause) process, and `probe serve` a pod that answers
// HTTP on :8080 with what the tests ask of it: which kernel it runs on
// (gVisor's differs from the host's) and whether it can open a TCP
// connection to an address (what a NetworkPolicy allows).
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	mode := "serve"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	switch mode {
	case "pause":
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
	case "serve":
		serve()
	default:
		fmt.Fprintln(os.Stderr, "usage: probe pause|serve")
		os.Exit(2)
	}
}

func serve() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /kernel", func(w http.ResponseWriter, r *http.Request) {
		var u syscall.Utsname
		if err := syscall.Uname(&u); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		var b strings.Builder
		for _, c := range u.Release {
			if c == 0 {
				break
			}
			b.WriteByte(byte(c))
		}
		fmt.Fprintln(w, b.String())
	})
	// /dial?addr=host:port answers 200 when a TCP connection opens within
	// two seconds, else 502 with the error.
	mux.HandleFunc("GET /dial", func(w http.ResponseWriter, r *http.Request) {
		conn, err := net.DialTimeout("tcp", r.URL.Query().Get("addr"), 2*time.Second)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn.Close()
		fmt.Fprintln(w, "connected")
	})
	srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		os.Exit(0)
	}()
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
