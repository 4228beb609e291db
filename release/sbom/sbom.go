// Package sbom writes an SPDX 2.3 document (JSON) of the Go modules linked
// into a binary, from the build info the Go toolchain records in it
// (debug/buildinfo, what `go version -m` prints): the binary itself with
// its SHA-256, the Go standard library at the toolchain's version, and
// every module with its version, go.sum hash and package URL. Nothing but
// the binary's bytes and the given version and time goes in, so the same
// binary gives the same document.
package sbom

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"
)

// Document is the part of SPDX 2.3 that sandlot writes.
type Document struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      CreationInfo   `json:"creationInfo"`
	Packages          []Package      `json:"packages"`
	Relationships     []Relationship `json:"relationships"`
}

// CreationInfo says when and by what the document was made.
type CreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

// Package is an SPDX package: the binary, the standard library or a
// module.
type Package struct {
	SPDXID                string        `json:"SPDXID"`
	Name                  string        `json:"name"`
	VersionInfo           string        `json:"versionInfo,omitempty"`
	DownloadLocation      string        `json:"downloadLocation"`
	FilesAnalyzed         bool          `json:"filesAnalyzed"`
	Checksums             []Checksum    `json:"checksums,omitempty"`
	ExternalRefs          []ExternalRef `json:"externalRefs,omitempty"`
	PrimaryPackagePurpose string        `json:"primaryPackagePurpose,omitempty"`
	Comment               string        `json:"comment,omitempty"`
}

// Checksum is a file checksum.
type Checksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

// ExternalRef is a package URL.
type ExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

// Relationship relates two elements.
type Relationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

// Namespace prefixes every document's namespace, which ends in the
// binary's name and hash so no two binaries share one.
const Namespace = "https://github.com/sandlot/sandlot/spdx/"

// ForBinary reads the build info of the binary at path and returns its
// SPDX document. version is the main module's (a release's tag: the
// build info says "(devel)" when VCS stamping is off); created is the
// document's time (the release's SOURCE_DATE_EPOCH).
func ForBinary(path, version string, created time.Time) (*Document, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sbom: %s: %w", path, err)
	}
	sum := sha256.Sum256(b)
	name := filepath.Base(path)
	bin := Package{
		SPDXID:                "SPDXRef-Binary",
		Name:                  name,
		VersionInfo:           version,
		DownloadLocation:      "NOASSERTION",
		Checksums:             []Checksum{{"SHA256", hex.EncodeToString(sum[:])}},
		PrimaryPackagePurpose: "APPLICATION",
		Comment:               fmt.Sprintf("Go package %s of module %s", bi.Path, bi.Main.Path),
	}
	doc := &Document{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              name,
		DocumentNamespace: Namespace + url.PathEscape(name) + "-" + hex.EncodeToString(sum[:]),
		CreationInfo: CreationInfo{
			Created:  created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: sandlot-release", "Tool: " + bi.GoVersion},
		},
		Packages: []Package{bin},
		Relationships: []Relationship{
			{"SPDXRef-DOCUMENT", "DESCRIBES", bin.SPDXID},
		},
	}
	add := func(id string, p Package) {
		p.SPDXID = id
		if p.DownloadLocation == "" {
			p.DownloadLocation = "NOASSERTION"
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, Relationship{bin.SPDXID, "CONTAINS", id})
	}
	main := bi.Main
	main.Version = version
	mp := module(main)
	// A release's version need not be on the module proxy (a build
	// between tags), so no download location is claimed for it.
	mp.DownloadLocation = "NOASSERTION"
	add("SPDXRef-Module-main", mp)
	add("SPDXRef-Go-stdlib", Package{
		Name:         "stdlib",
		VersionInfo:  bi.GoVersion,
		ExternalRefs: []ExternalRef{purl("stdlib", bi.GoVersion)},
	})
	for i, m := range bi.Deps {
		add(fmt.Sprintf("SPDXRef-Module-%d", i+1), module(*m))
	}
	return doc, nil
}

// module is a module of the build info, as it was linked (the
// replacement, when one replaced it).
func module(m debug.Module) Package {
	comment := ""
	if m.Replace != nil {
		comment = fmt.Sprintf("replaces %s %s", m.Path, m.Version)
		m = *m.Replace
	}
	p := Package{Name: m.Path, VersionInfo: m.Version, Comment: comment}
	if m.Version != "" && m.Version != "(devel)" && !strings.HasPrefix(m.Path, ".") && !strings.HasPrefix(m.Path, "/") {
		p.DownloadLocation = "https://proxy.golang.org/" + escapePath(m.Path) + "/@v/" + m.Version + ".zip"
		p.ExternalRefs = []ExternalRef{purl(m.Path, m.Version)}
	}
	if m.Sum != "" {
		p.Comment = strings.TrimSpace(p.Comment + " go.sum " + m.Sum)
	}
	return p
}

func purl(path, version string) ExternalRef {
	return ExternalRef{"PACKAGE-MANAGER", "purl", "pkg:golang/" + path + "@" + url.PathEscape(version)}
}

// escapePath is the module proxy's case encoding: an upper-case letter
// becomes '!' and its lower case.
func escapePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Write writes the document of the binary at path beside it, as
// path.spdx.json, and returns that file's path.
func Write(path, version string, created time.Time) (string, error) {
	doc, err := ForBinary(path, version, created)
	if err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return "", err
	}
	out := path + ".spdx.json"
	return out, os.WriteFile(out, append(b, '\n'), 0o644)
}
