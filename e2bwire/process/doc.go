// Package process holds the message types generated from process.proto:
// E2B's envd process service (start, connect, input, signals).
package process
