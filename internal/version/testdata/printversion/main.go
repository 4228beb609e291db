// Command printversion prints internal/version's Info as "VERSION COMMIT",
// for the tests that build it the ways a release, `go build` and
// `go install` do.
package main

import (
	"fmt"

	"github.com/sandlot/sandlot/internal/version"
)

func main() {
	v := version.Get()
	fmt.Printf("%s %s\n", v.Version, v.Commit)
}
