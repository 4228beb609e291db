// Command sandlot-agent runs as PID 1 inside every local sandbox and serves
// the agent protocol (package agent) on a unix socket.
package main

func main() {}
