// Package e2bwire is E2B's wire protocol as both sides of it in sandlot
// speak it: the port numbers and header names of the control plane and of
// sandbox calls, and the proto definitions of envd's services (process and
// filesystem) with the Go code generated from them (message types in
// e2bwire/process and e2bwire/filesystem, Connect handlers and clients in
// their ...connect subpackages). The server (api/e2bcompat) and the client
// provider (provider/e2b) import it; it imports nothing of sandlot.
//
// Regenerate with `go generate ./e2bwire` (needs protoc, protoc-gen-go and
// protoc-gen-connect-go on PATH); TestGeneratedCurrent checks that the
// committed output matches.
package e2bwire

//go:generate protoc -I . --go_out=. --go_opt=paths=source_relative --connect-go_out=. --connect-go_opt=paths=source_relative process/process.proto filesystem/filesystem.proto
