package layer_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sandlot/sandlot/errdefs"
	"github.com/sandlot/sandlot/image/layer"
)

func TestFiles(t *testing.T) {
	epoch := time.Unix(1700000000, 0)
	digest := func(files ...layer.File) string {
		l, err := layer.Files(epoch, types.OCILayer, files...)
		if err != nil {
			t.Fatal(err)
		}
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	a := layer.File{Path: "/usr/bin/a", Mode: 0o755, Body: []byte("a")}
	b := layer.File{Path: "/usr/local/bin/b", Mode: 0o755, Body: []byte("b")}
	if d1, d2 := digest(a, b), digest(b, a); d1 != d2 {
		t.Errorf("the order of the files changed the layer: %s, %s", d1, d2)
	}
	for _, tc := range []struct {
		name  string
		files []layer.File
	}{
		{"relative", []layer.File{{Path: "usr/bin/a", Mode: 0o755}}},
		{"unclean", []layer.File{{Path: "/usr/../etc/passwd", Mode: 0o644}}},
		{"root", []layer.File{{Path: "/", Mode: 0o755}}},
		{"set-id", []layer.File{{Path: "/usr/bin/a", Mode: 0o4755}}},
		{"twice", []layer.File{a, a}},
		{"file and directory", []layer.File{{Path: "/usr", Mode: 0o644}, a}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := layer.Files(epoch, types.OCILayer, tc.files...); !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("got %v, want invalid_argument", err)
			}
		})
	}
}
