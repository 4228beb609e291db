// Package desktop is sandlot's desktop sandboxes: the `desktop`
// template's image (Debian with Xvfb, XFCE, xdotool, scrot, x11vnc,
// noVNC and Chromium, built from Debian's mirror like the default base)
// and its resource defaults.
package desktop

import (
	_ "embed"

	"github.com/sandlot/sandlot/image/debian"
)

// Template is the desktop template's name: what E2B's desktop SDK
// creates by default.
const Template = "desktop"

// Packages is what the desktop image holds beyond Debian's essential set
// and apt. The E2B desktop SDK runs Xvfb, xdpyinfo, startxfce4 (and
// checks xfce4-session, xfwm4, xfdesktop with pgrep), scrot, xdotool,
// xrandr, xdg-open, gtk-launch, x11vnc, /opt/noVNC/utils/novnc_proxy
// (websockify) and netstat, ps and pgrep. python3 and node (a Depends of
// novnc) serve the agent's kernels; mousepad and xfce4-terminal are the
// editor and the terminal a desktop is expected to have.
var Packages = []string{
	"bash", "ca-certificates", "coreutils", "curl", "procps", "net-tools", "python3",
	"xvfb", "xauth", "x11-xserver-utils", "x11-utils", "xdotool", "scrot", "x11vnc",
	"xfce4-session", "xfwm4", "xfdesktop4", "xfce4-panel", "xfce4-settings", "xfce4-helpers", "xfce4-terminal",
	"dbus-x11", "xdg-utils", "libglib2.0-bin", "libgtk-3-bin", "adwaita-icon-theme",
	"novnc", "websockify", "chromium", "mousepad",
	"fonts-dejavu-core", "fonts-liberation",
}

//go:embed customize.sh
var customize string

// ImageConfig is the desktop image's recipe (cache key included).
func ImageConfig() debian.Config {
	return debian.Config{Packages: Packages, Customize: []string{customize}}
}
