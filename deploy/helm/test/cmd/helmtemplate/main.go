// Command helmtemplate renders the sandlot chart as `helm template` does,
// with Helm's own Go library, and prints the manifests on stdout for
// `kubectl apply -f -`. The test cluster's install (internal/kubetest/install,
// used by e2e/k8s and make k8s-up) goes through it, so no helm binary is
// needed and Helm stays out of sandlot's go.mod.
//
//	helmtemplate -chart deploy/helm/sandlot -name sandlot -namespace sandlot -f values.yaml
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
)

type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(s string) error { *f = append(*f, s); return nil }

func main() {
	chartDir := flag.String("chart", "deploy/helm/sandlot", "the chart's directory")
	name := flag.String("name", "sandlot", "the release's name")
	namespace := flag.String("namespace", "sandlot", "the release's namespace")
	var values files
	flag.Var(&values, "f", "a values file (repeatable; later ones win)")
	flag.Parse()
	out, err := render(*chartDir, *name, *namespace, values)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helmtemplate:", err)
		os.Exit(1)
	}
	fmt.Print(out)
}

func render(chartDir, name, namespace string, valueFiles []string) (string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return "", err
	}
	vals := map[string]any{}
	for _, f := range valueFiles {
		v, err := common.ReadValuesFile(f)
		if err != nil {
			return "", err
		}
		vals = util.MergeTables(v, vals)
	}
	rv, err := util.ToRenderValues(ch, vals, common.ReleaseOptions{Name: name, Namespace: namespace, IsInstall: true}, common.DefaultCapabilities)
	if err != nil {
		return "", err
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return "", err
	}
	// Templates in a stable order; NOTES.txt and helpers are not manifests.
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range out {
			if strings.HasSuffix(n, ".yaml") && !yield(n) {
				return
			}
		}
	})
	var b strings.Builder
	for _, n := range names {
		if strings.TrimSpace(out[n]) == "" {
			continue
		}
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", n, strings.TrimSpace(out[n]))
	}
	return b.String(), nil
}
