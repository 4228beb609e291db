// Command testimages builds the Debian images the tests share into their
// store (image/debian/debiantest, /var/cache/sandlot-test or
// $SANDLOT_TEST_IMAGES), all at once, each only when it is not cached.
// scripts/deps.sh test runs it while the test cluster's binaries compile:
// the builds wait on the network and on dpkg, the compile on the CPU, so
// on a new machine the images cost no time of their own and no test
// package waits minutes for one (docs/development.md).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/sandlot/sandlot/codeinterp"
	"github.com/sandlot/sandlot/desktop"
	"github.com/sandlot/sandlot/image/daemonimage"
	"github.com/sandlot/sandlot/image/debian"
	"github.com/sandlot/sandlot/image/debian/debiantest"
)

// images are every image the tests take from debiantest, under the names
// they ask for (TestImagesCoverTests keeps the list whole).
func images() map[string]debian.Config {
	return map[string]debian.Config{
		debiantest.Name:       {},
		"default-core":        debian.DefaultStages()[0].Config,
		desktop.Template:      desktop.ImageConfig(),
		codeinterp.Template:   codeinterp.ImageConfig(),
		"sandlot-daemon-base": daemonimage.BaseConfig(),
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for name, cfg := range images() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			built, err := debiantest.Prepare(ctx, cfg, name)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failed++
				fmt.Fprintf(os.Stderr, "testimages: %s: %v\n", name, err)
			case built > 0:
				fmt.Fprintf(os.Stderr, "testimages: built %s in %s\n", name, built.Round(time.Second))
			default:
				fmt.Fprintf(os.Stderr, "testimages: %s is cached\n", name)
			}
		}()
	}
	wg.Wait()
	if failed > 0 {
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "testimages: all images present in %s (%s)\n", debiantest.StoreDir(), time.Since(start).Round(time.Second))
}
