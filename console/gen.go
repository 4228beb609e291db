//go:build ignore

// gen writes the console's bundle (package bundle) into dist/, replacing
// what was there: `go generate ./console`.
package main

import (
	"log"
	"os"
	"path/filepath"

	"github.com/sandlot/sandlot/console/bundle"
)

func main() {
	files, err := bundle.Build("web")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.RemoveAll("dist"); err != nil {
		log.Fatal(err)
	}
	if err := os.MkdirAll("dist", 0o755); err != nil {
		log.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join("dist", name), b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
