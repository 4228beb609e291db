package cli

import (
	"flag"
	"fmt"

	"github.com/sandlot/sandlot/errdefs"
)

// The desktop template's modes (--desktop-template).
const (
	desktopFirstUse = "first-use" // built from Debian's mirror when first asked for, cached
	desktopStart    = "start"     // built at the daemon's start when not cached
	desktopOff      = "off"       // not offered
)

// desktopFlags configure desktop sandboxes (docs/desktop.md).
type desktopFlags struct {
	template string
}

func (f *desktopFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.template, "desktop-template", desktopFirstUse,
		"the built-in \"desktop\" template (Xvfb, XFCE, Chromium, noVNC): first-use (built from the Debian mirror when first asked for, cached), start (built at start), off")
}

func (f desktopFlags) check() error {
	switch f.template {
	case desktopFirstUse, desktopStart, desktopOff:
		return nil
	}
	return fmt.Errorf("--desktop-template %q (first-use, start, off): %w", f.template, errdefs.ErrInvalidArgument)
}

// offered reports whether the desktop template is offered ("": a
// serveConfig built in code, or mcp: not).
func (f desktopFlags) offered() bool { return f.template != desktopOff && f.template != "" }
