package daemon

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sandlot/sandlot/api/server"
	"github.com/sandlot/sandlot/api/server/servertest"
	"github.com/sandlot/sandlot/store"
	"github.com/sandlot/sandlot/tenant"
)

// BenchmarkToolCallOverhead measures the HTTP layer alone (the front
// door's request id, span and access log to a discarding handler, /v1's
// auth against a real SQLite tenant store, JSON in and out, routing) over
// loopback, with the fake tool.
func BenchmarkToolCallOverhead(b *testing.B) {
	st, err := store.Open(context.Background(), "sqlite://"+b.TempDir()+"/t.db")
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	key, _ := tenant.NewKey()
	tn := &tenant.Tenant{Name: "bench", KeyPrefix: tenant.Prefix(key)}
	if err := st.CreateTenant(context.Background(), tn, tenant.HashKey(key)); err != nil {
		b.Fatal(err)
	}
	e := servertest.NewEnv(func(c *server.Config) { c.Auth = tenant.NewAuthenticator(st, tenant.AuthConfig{}) })
	ts := httptest.NewServer(newFrontDoor(frontConfig{V1: e.Config}))
	defer ts.Close()
	body := []byte(`{"conversationId":"b","args":{"language":"python","code":"1+1"}}`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req, _ := http.NewRequest("POST", ts.URL+"/v1/tools/run_code", bytes.NewReader(body))
		req.Header.Set("X-API-KEY", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%d %s", resp.StatusCode, buf.String())
		}
	}
}
