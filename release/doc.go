// Package release is sandlot's release tooling, a module of its own so
// that nfpm (the Debian package builder) and its dependencies never enter
// the daemon's module graph or binary: dist cross-builds the binaries with
// their checksums and SBOMs, sbom writes SPDX documents from Go build
// info, deb packages a build as a .deb, and cmd/sandlot-release is the
// program `make dist` and `make deb` run.
package release
