package desktop

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// TestDesktopSDKColdDrawn runs e2e/e2b/desktop-drawn.mjs against serve
// without a warm desktop: @e2b/desktop's Sandbox.create() returns once the
// desktop is drawn, so the screenshot taken right after it shows XFCE
// (backdrop, icons, panels: over 3000 colours; about 1400 without the
// panels painted), not the black screen with the pointer (2 colours, or
// some 70 with a panel half drawn) the SDK's own start of XFCE returns on.
// The stream-ready wait bounds the wait for the drawing; here it is long
// enough for a loaded machine.
func TestDesktopSDKColdDrawn(t *testing.T) {
	node, dir := sdkSetup(t)
	_, srvURL, key := serve(t, "--pool-sizes", "desktop=0", "--desktop-stream-wait", "3m")
	shot := filepath.Join(t.TempDir(), "first.png")
	runSDK(t, node, dir, "desktop-drawn.mjs", srvURL, key, "SHOT="+shot)
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	n := colours(img)
	t.Logf("first screenshot after a cold create: %v, %d colours", img.Bounds().Size(), n)
	if n < 2500 {
		t.Errorf("the first screenshot after a cold Sandbox.create() has %d colours: the desktop was not drawn", n)
	}
}

// colours counts the distinct colours of img.
func colours(img image.Image) int {
	seen := map[uint32]bool{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			seen[(cr>>8)<<16|(cg>>8)<<8|cb>>8] = true
		}
	}
	return len(seen)
}
