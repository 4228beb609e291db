// Package envd holds the proto definitions of E2B's envd services (process
// and filesystem) and the Go code generated from them: message types in
// envd/process and envd/filesystem, Connect handlers and clients in their
// ...connect subpackages. api/e2bcompat serves them; provider/e2b calls them.
//
// Regenerate with `go generate ./api/e2bcompat/envd` (needs protoc,
// protoc-gen-go and protoc-gen-connect-go on PATH); TestGeneratedCurrent
// checks that the committed output matches.
package envd

//go:generate protoc -I . --go_out=. --go_opt=paths=source_relative --connect-go_out=. --connect-go_opt=paths=source_relative process/process.proto filesystem/filesystem.proto
