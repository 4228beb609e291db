package server

import (
	"errors"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandlot/sandlot/errdefs"
)

// metadataPrefix names the extended attributes that hold a file's user
// metadata, as E2B's envd keeps them: user.e2b.<key>. Anything in the
// sandbox may set them too (setfattr), and they show as metadata.
const metadataPrefix = "user.e2b."

// Bounds: the attributes are read for every listed entry, and a hostile
// file may carry any number of them.
const (
	maxMetadataKeys  = 64
	maxMetadataValue = 4096
	maxXattrList     = 64 << 10
)

// readMetadata returns path's metadata, nil when it has none (or the file
// system keeps no user attributes).
func readMetadata(path string) map[string]string {
	buf := make([]byte, 1024)
	n, err := unix.Listxattr(path, buf)
	if errors.Is(err, unix.ERANGE) {
		if n, err = unix.Listxattr(path, nil); err != nil || n > maxXattrList {
			return nil
		}
		buf = make([]byte, n)
		n, err = unix.Listxattr(path, buf)
	}
	if err != nil || n <= 0 {
		return nil
	}
	var md map[string]string
	val := make([]byte, maxMetadataValue)
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		key, ok := strings.CutPrefix(name, metadataPrefix)
		if !ok || key == "" {
			continue
		}
		m, err := unix.Getxattr(path, name, val)
		if err != nil {
			continue // gone meanwhile, or larger than the bound
		}
		if md == nil {
			md = map[string]string{}
		}
		md[key] = string(val[:m])
		if len(md) == maxMetadataKeys {
			break
		}
	}
	return md
}

// replaceMetadata makes md path's whole metadata: the attributes it had are
// removed first.
func replaceMetadata(path string, md map[string]string) error {
	if len(md) > maxMetadataKeys {
		return errf(errdefs.CodeInvalidArgument, "write %s: %d metadata keys, at most %d", path, len(md), maxMetadataKeys)
	}
	for k := range readMetadata(path) {
		_ = unix.Removexattr(path, metadataPrefix+k)
	}
	for k, v := range md {
		if k == "" || strings.ContainsAny(k, "\x00") || len(v) > maxMetadataValue {
			return errf(errdefs.CodeInvalidArgument, "write %s: bad metadata key %q or value over %d bytes", path, k, maxMetadataValue)
		}
		if err := unix.Setxattr(path, metadataPrefix+k, []byte(v), 0); err != nil {
			return fsErr("set metadata of", path, err)
		}
	}
	return nil
}
