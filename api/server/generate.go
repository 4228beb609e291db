package server

// api/openapi.json's tool operations are generated from the tool registry;
// TestOpenAPITools fails while they differ and rewrites them with -update.
//go:generate go test -run TestOpenAPITools -update .
