package server_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandlot/sandlot/agent/server"
)

// TestParseUserIDs: --user is NAME:UID:GID; anything else is refused.
func TestParseUserIDs(t *testing.T) {
	got, err := server.ParseUserIDs("app:1234:1235")
	if err != nil || !cmp.Equal(*got, server.UserIDs{Name: "app", UID: 1234, GID: 1235}) {
		t.Errorf("app:1234:1235 = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "app", "app:1", ":1:1", "app:x:1", "app:1:-1", "app:1:1:1", "app:4294967296:1"} {
		if _, err := server.ParseUserIDs(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
