// Package filesystemconnect holds the generated Connect handler and client
// of the envd filesystem service.
package filesystemconnect
