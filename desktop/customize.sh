set -e
# mmdebstrap customize hook of the desktop image: $1 is the new tree.
root="$1"

# noVNC where E2B's desktop SDK runs it: /opt/noVNC/utils/novnc_proxy,
# web root /opt/noVNC (Debian's novnc lives in /usr/share/novnc and finds
# the websockify package on PATH).
mkdir -p "$root/opt"
ln -sfn /usr/share/novnc "$root/opt/noVNC"

# X's socket directory, made by root as X expects, so an Xvfb started by
# the sandbox user needs no privilege.
mkdir -p "$root/tmp/.X11-unix"
chmod 1777 "$root/tmp/.X11-unix"

# Chromium inside a sandbox: the sandbox is the wall (chromium's own
# sandbox would need user namespaces inside it), no GPU, /dev/shm may be
# small, no first-run dialogs, a local DevTools endpoint for the health
# check. /usr/bin/chromium reads every file in /etc/chromium.d.
mkdir -p "$root/etc/chromium.d"
cat > "$root/etc/chromium.d/sandlot" <<'FLAGS'
export CHROMIUM_FLAGS="$CHROMIUM_FLAGS --no-sandbox --test-type --disable-dev-shm-usage --disable-gpu --no-first-run --no-default-browser-check --password-store=basic --disable-features=Translate --remote-debugging-address=127.0.0.1 --remote-debugging-port=9222"
FLAGS

# Chromium is the default browser for xdg-open (exo-open under XFCE, gio
# elsewhere) and for x-www-browser.
mkdir -p "$root/etc/xdg/xfce4"
cat > "$root/etc/xdg/mimeapps.list" <<'MIME'
[Default Applications]
x-scheme-handler/http=chromium.desktop
x-scheme-handler/https=chromium.desktop
text/html=chromium.desktop
application/xhtml+xml=chromium.desktop
text/plain=org.xfce.mousepad.desktop
MIME
printf 'WebBrowser=chromium\nTerminalEmulator=xfce4-terminal\n' > "$root/etc/xdg/xfce4/helpers.rc"
chroot "$root" update-alternatives --set x-www-browser /usr/bin/chromium >/dev/null 2>&1 || true

# The panel asks on its first start whether to use the default layout:
# give every user the default, so no dialog covers the screen.
conf="$root/etc/xdg/xfce4/xfconf/xfce-perchannel-xml"
mkdir -p "$conf"
if [ -f "$root/etc/xdg/xfce4/panel/default.xml" ]; then
	cp "$root/etc/xdg/xfce4/panel/default.xml" "$conf/xfce4-panel.xml"
fi

# A desktop entry for the browser on the desktop, as people expect.
mkdir -p "$root/home/user/Desktop"
if [ -f "$root/usr/share/applications/chromium.desktop" ]; then
	cp "$root/usr/share/applications/chromium.desktop" "$root/home/user/Desktop/chromium.desktop"
	chmod 0755 "$root/home/user/Desktop/chromium.desktop"
fi
chown -R 1000:1000 "$root/home/user/Desktop"
