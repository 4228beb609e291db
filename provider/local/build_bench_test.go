package local

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandlot/sandlot/contexts"
	"github.com/sandlot/sandlot/image/build"
	"github.com/sandlot/sandlot/image/recipe"
)

// BenchmarkBuildOneRun measures a build of FROM + one RUN on the busybox
// image, from Build to the stored image (step sandbox create, the
// command, its layer diffed, compressed, unpacked and stored). Floor,
// interleaved: a sandbox of the same image created, one command run
// in it, destroyed.
func BenchmarkBuildOneRun(b *testing.B) {
	s := busyboxStore(b)
	p := newImageProvider(b, "crun", s, false)
	bl := build.New(build.Config{Store: s, Runner: p.BuildRunner(BuildConfig{})})
	ctx := context.Background()
	var builds, floors []time.Duration
	for i := 0; b.Loop(); i++ {
		rec, err := recipe.ParseDockerfile(strings.NewReader(fmt.Sprintf("FROM bb\nRUN echo %d > /made\n", i)), nil)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := bl.Build(ctx, rec, build.Options{Name: "bench"}); err != nil {
			b.Fatal(err)
		}
		builds = append(builds, time.Since(start))

		start = time.Now()
		sb, err := p.Create(ctx, contexts.Spec{Template: "bb"})
		if err != nil {
			b.Fatal(err)
		}
		if r := sh(b, sb.(*Sandbox).Client, "echo x > /tmp/made"); r.ExitCode != 0 {
			b.Fatal(r.Stderr)
		}
		sb.Close()
		if err := p.Destroy(ctx, sb.ID()); err != nil {
			b.Fatal(err)
		}
		floors = append(floors, time.Since(start))
	}
	b.ReportMetric(ms(p50(builds)), "build-p50-ms")
	b.ReportMetric(ms(p50(floors)), "floor-p50-ms")
	b.ReportMetric(float64(p50(builds))/float64(p50(floors)), "x-floor")
}
