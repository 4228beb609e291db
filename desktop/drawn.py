# Waits, until argv[1] (unix milliseconds) at the latest, for $DISPLAY to
# show the XFCE desktop: xfdesktop's window and the panels are viewable,
# the screen has at least argv[2] colours (every 7th pixel of every 7th
# row), each panel is painted where it stands, and the screen is the same
# in two samples in a row (painted, not painting). Exits 0 once drawn, 1
# when the time ran out, 2 when the display cannot be opened. Until
# XFCE's clients have painted, the screen is the X server's root (the
# pointer is a sprite that XGetImage leaves out), which a check of the
# processes (pgrep) cannot tell.
# One process and one connection for the whole wait: the image has libX11
# and python3, and a process per probe would cost more than the probe.
import ctypes, sys, time

X = ctypes.CDLL("libX11.so.6")
vp, ul, ci, ui = ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_uint


class Attrs(ctypes.Structure):  # XWindowAttributes, up to map_state
    _fields_ = [("x", ci), ("y", ci), ("width", ci), ("height", ci), ("border_width", ci), ("depth", ci),
                ("visual", vp), ("root", ul), ("class_", ci), ("bit_gravity", ci), ("win_gravity", ci),
                ("backing_store", ci), ("backing_planes", ul), ("backing_pixel", ul), ("save_under", ci),
                ("colormap", ul), ("map_installed", ci), ("map_state", ci), ("rest", ctypes.c_char * 64)]


class Hint(ctypes.Structure):  # XClassHint
    _fields_ = [("res_name", ctypes.c_char_p), ("res_class", ctypes.c_char_p)]


class Image(ctypes.Structure):  # XImage, up to bits_per_pixel
    _fields_ = [("width", ci), ("height", ci), ("xoffset", ci), ("format", ci), ("data", vp),
                ("byte_order", ci), ("bitmap_unit", ci), ("bitmap_bit_order", ci), ("bitmap_pad", ci),
                ("depth", ci), ("bytes_per_line", ci), ("bits_per_pixel", ci)]


X.XOpenDisplay.restype, X.XOpenDisplay.argtypes = vp, [ctypes.c_char_p]
X.XDefaultRootWindow.restype, X.XDefaultRootWindow.argtypes = ul, [vp]
X.XQueryTree.argtypes = [vp, ul, ctypes.POINTER(ul), ctypes.POINTER(ul), ctypes.POINTER(ctypes.POINTER(ul)), ctypes.POINTER(ui)]
X.XGetWindowAttributes.argtypes = [vp, ul, ctypes.POINTER(Attrs)]
X.XGetClassHint.argtypes = [vp, ul, ctypes.POINTER(Hint)]
X.XGetImage.restype = ctypes.POINTER(Image)
X.XGetImage.argtypes = [vp, ul, ci, ci, ui, ui, ul, ci]
X.XFree.argtypes = [vp]
X.XSync.argtypes = [vp, ci]

# A window can go between XQueryTree and the next call on it: Xlib's
# default handler would end the process on the BadWindow; this one ignores
# it (the call then reports failure, and the window is skipped).
HANDLER = ctypes.CFUNCTYPE(ci, vp, vp)
X.XSetErrorHandler.restype, X.XSetErrorHandler.argtypes = vp, [HANDLER]
ignore_errors = HANDLER(lambda display, event: 0)  # kept: Xlib holds the pointer
X.XSetErrorHandler(ignore_errors)

IS_VIEWABLE, ALL_PLANES, Z_PIXMAP = 2, ~0 & 0xFFFFFFFFFFFFFFFF, 2
deadline = int(sys.argv[1]) / 1000
want_colours = int(sys.argv[2])
d = X.XOpenDisplay(None)
if not d:
    sys.exit(2)
root = X.XDefaultRootWindow(d)


X.XTranslateCoordinates.argtypes = [vp, ul, ul, ci, ci, ctypes.POINTER(ci), ctypes.POINTER(ci), ctypes.POINTER(ul)]


def windows(w, depth=0, found=None):
    """The viewable windows under w (three levels: a window manager's
    frame holds its client one level down) as (WM_CLASS class, x, y,
    width, height), on the screen's coordinates."""
    found = [] if found is None else found
    r, p, kids, n = ul(), ul(), ctypes.POINTER(ul)(), ui()
    if not X.XQueryTree(d, w, ctypes.byref(r), ctypes.byref(p), ctypes.byref(kids), ctypes.byref(n)):
        return found
    ids = [kids[i] for i in range(n.value)]
    if kids:
        X.XFree(kids)
    for k in ids:
        a = Attrs()
        if not X.XGetWindowAttributes(d, k, ctypes.byref(a)) or a.map_state != IS_VIEWABLE:
            continue
        h = Hint()
        x, y, child = ci(), ci(), ul()
        if X.XGetClassHint(d, k, ctypes.byref(h)) and X.XTranslateCoordinates(d, k, root, 0, 0, ctypes.byref(x), ctypes.byref(y), ctypes.byref(child)):
            found.append(((h.res_class or b"").decode(errors="replace"), x.value, y.value, a.width, a.height))
        if depth < 2:
            windows(k, depth + 1, found)
    return found


def screen():
    """The screen's pixels (32 bits each), its row length and size, or None."""
    a = Attrs()
    X.XGetWindowAttributes(d, root, ctypes.byref(a))
    img = X.XGetImage(d, root, 0, 0, a.width, a.height, ALL_PLANES, Z_PIXMAP)
    if not img:
        return None
    i = img.contents
    data = ctypes.string_at(i.data, i.bytes_per_line * i.height)
    X.XFree(i.data)
    X.XFree(img)
    if i.bits_per_pixel != 32:
        return None
    return memoryview(data).cast("I"), i.bytes_per_line // 4, a.width, a.height


def colours(px, stride, x, y, w, h, step):
    """The colours of the screen's rectangle (x, y, w, h), every step-th pixel."""
    seen = set()
    for row in range(max(y, 0), min(y + h, len(px) // stride), step):
        seen.update(px[row * stride + max(x, 0):row * stride + min(x + w, stride):step])
    return len(seen)


def drawn(last):
    """Whether the desktop shows (and the screen sample to compare next):
    xfdesktop's window viewable, the screen's colours many, and each panel
    that is not a sliver painted where it stands (the window manager
    composites: a panel mapped but not yet composited shows the backdrop
    there, one colour)."""
    wins = windows(root)
    panels = [wn for wn in wins if wn[0] == "Xfce4-panel" and wn[3] >= 8 and wn[4] >= 8]
    if not panels or not any(wn[0] == "Xfdesktop" for wn in wins):
        return False, None
    s = screen()
    if s is None:
        return False, None
    px, stride, w, h = s
    if colours(px, stride, 0, 0, w, h, 7) < want_colours:
        return False, None
    if any(colours(px, stride, x, y, pw, ph, 2) < 8 for _, x, y, pw, ph in panels):
        return False, None
    b = bytes(px[::7])
    return b == last, b


last, probes = None, 0
while True:
    probes += 1
    X.XSync(d, 0)
    ok, last = drawn(last)
    if ok:
        sys.exit(0)
    if time.time() > deadline and probes >= 2:  # a deadline past already: one look (two samples)
        sys.exit(1)
    time.sleep(0.05)
