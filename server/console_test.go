package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
)

// TestConsoleMounted: tide serve serves the web console at / and its data
// under /ui/api/, authenticated by the API's tokens.
func TestConsoleMounted(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	alice, err := ts.admin.CreateTenant(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, tok string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("GET", ts.url+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	if code, _ := get("/", ""); code != 200 {
		t.Errorf("GET /: %d, want the console's page", code)
	}
	if code, _ := get("/ui/api/summary", "not-a-token"); code != 401 {
		t.Errorf("unknown token: %d, want 401", code)
	}
	for _, c := range []struct {
		tok, tenant string
		admin       bool
	}{{ts.token, "admin", true}, {alice.Token, "alice", false}} {
		code, out := get("/ui/api/summary", c.tok)
		me, _ := out["me"].(map[string]any)
		if code != 200 || me["tenant"] != c.tenant || me["admin"] != c.admin {
			t.Errorf("summary as %s: %d %v", c.tenant, code, out)
		}
	}
	if code, _ := get("/v1/nothing", ts.token); code != 404 {
		t.Errorf("unknown API path: %d, want 404", code)
	}
}
