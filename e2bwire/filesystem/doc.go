// Package filesystem holds the message types generated from
// filesystem.proto: E2B's envd filesystem service (stat, list, watch).
package filesystem
