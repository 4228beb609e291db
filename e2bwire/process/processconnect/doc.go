// Package processconnect holds the generated Connect handler and client of
// the envd process service.
package processconnect
