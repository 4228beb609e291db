package volumes

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandlot/sandlot/errdefs"
)

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"data", true},
		{"a", true},
		{"my_vol-2", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), false},
		{"", false},
		{"..", false},
		{".", false},
		{"a/b", false},
		{"/", false},
		{"a\x00b", false},
		{"Data", false},
		{"-x", false},
		{"a b", false},
		{"é", false},
	} {
		err := CheckName(tc.name)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("CheckName(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestCheckPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"/mnt/data", true},
		{"/home/user/data", true},
		{"/data", true},
		{"/srv", true},
		{"/home", true},
		{"/", false},
		{"", false},
		{"/..", false},
		{"/mnt/../etc", false},
		{"/mnt/./x", false},
		{"//mnt", false},
		{"/mnt/", false},
		{"mnt", false},
		{"/proc", false},
		{"/proc/self", false},
		{"/sys/fs", false},
		{"/dev", false},
		{"/dev/shm", false},
		{"/etc", false},
		{"/etc/ssl", false},
		{"/usr/local/x", false},
		{"/opt", false}, // the agent's /opt/sandlot is under it
		{"/opt/sandlot", false},
		{"/opt/other", true},
		{"/run", false},
		{"/run/sandlot", false},
		{"/var", false}, // /var/run is under it
		{"/var/data", true},
		{"/lib64", false},
		{"/mnt/a\x00b", false},
		{"/mnt/a\nb", false},
		{"/" + strings.Repeat("a", 256), false},
		{"/" + strings.Repeat("a/", 600), false},
	} {
		err := CheckPath(tc.path)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("CheckPath(%.40q) = %v, want ok %v", tc.path, err, tc.ok)
		}
	}
}

func TestCheckMounts(t *testing.T) {
	for _, tc := range []struct {
		paths []string
		ok    bool
	}{
		{[]string{"/a", "/b"}, true},
		{[]string{"/a", "/ab"}, true},
		{[]string{"/a", "/a"}, false},
		{[]string{"/a", "/a/b"}, false},
		{[]string{"/a/b", "/a"}, false},
	} {
		var ms []Mount
		for _, p := range tc.paths {
			ms = append(ms, Mount{VolumeID: NewID(), Path: p})
		}
		if err := CheckMounts(ms); (err == nil) != tc.ok {
			t.Errorf("CheckMounts(%v) = %v, want ok %v", tc.paths, err, tc.ok)
		}
	}
}
