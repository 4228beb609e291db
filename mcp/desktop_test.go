package mcp

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandlot/sandlot/tools"
)

// TestScreenshotContent: a desktop screenshot is image content for the
// model, with its size as text and no base64 in the text.
func TestScreenshotContent(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nrest")
	res := &tools.ScreenshotResult{PNG: base64.StdEncoding.EncodeToString(png), Width: 3, Height: 2}
	full, _ := json.Marshal(res)
	got := content(res, full)
	if len(got) != 2 {
		t.Fatalf("content = %d parts, want text and image", len(got))
	}
	txt, ok := got[0].(*sdk.TextContent)
	if !ok || !strings.Contains(txt.Text, `"width":3`) || strings.Contains(txt.Text, res.PNG) {
		t.Errorf("text = %+v", got[0])
	}
	img, ok := got[1].(*sdk.ImageContent)
	if !ok || img.MIMEType != "image/png" || string(img.Data) != string(png) {
		t.Errorf("image = %+v", got[1])
	}
}
