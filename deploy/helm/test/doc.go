// Package test holds the tests of sandlot's Helm chart (deploy/helm/sandlot):
// `helm lint` and template renders through Helm's own Go library. It is a
// module of its own so Helm and its Kubernetes dependencies stay out of
// sandlot's go.mod; the Makefile's TESTMODS runs it with make test.
package test
