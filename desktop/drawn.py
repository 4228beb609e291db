# Waits, until argv[1] (unix milliseconds) at the latest, for $DISPLAY to
# show the XFCE desktop: xfdesktop's window and a panel's are viewable,
# and the screen, sampled, has at least argv[2] colours and is the same in
# two samples in a row (painted, not painting). Exits 0 once drawn, 1
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

IS_VIEWABLE, ALL_PLANES, Z_PIXMAP = 2, ~0 & 0xFFFFFFFFFFFFFFFF, 2
deadline = int(sys.argv[1]) / 1000
want_colours = int(sys.argv[2])
d = X.XOpenDisplay(None)
if not d:
    sys.exit(2)
root = X.XDefaultRootWindow(d)


def classes(w, depth=0, found=None):
    """The WM_CLASS classes of the viewable windows under w (three levels:
    a window manager's frame holds its client one level down)."""
    found = set() if found is None else found
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
        if X.XGetClassHint(d, k, ctypes.byref(h)):
            found.add((h.res_class or b"").decode(errors="replace"))
        if depth < 2:
            classes(k, depth + 1, found)
    return found


def sample():
    """Every 7th pixel of the screen, or None."""
    a = Attrs()
    X.XGetWindowAttributes(d, root, ctypes.byref(a))
    img = X.XGetImage(d, root, 0, 0, a.width, a.height, ALL_PLANES, Z_PIXMAP)
    if not img:
        return None
    i = img.contents
    size = i.bytes_per_line * i.height
    data = ctypes.string_at(i.data, size)
    X.XFree(i.data)
    X.XFree(img)
    if i.bits_per_pixel != 32:
        return data[::7]
    return memoryview(data).cast("I")[::7]


last, probes = None, 0
while True:
    probes += 1
    X.XSync(d, 0)
    cls = classes(root)
    if "Xfdesktop" in cls and "Xfce4-panel" in cls:
        px = sample()
        if px is not None and len(set(px)) >= want_colours:
            b = bytes(px)
            if b == last:
                sys.exit(0)
            last = b
        else:
            last = None
    if time.time() > deadline and probes >= 2:  # a deadline past already: one look (two samples)
        sys.exit(1)
    time.sleep(0.05)
