package sidecar

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// startAdmin runs a sidecar whose file sets extra and returns its admin
// listener's base URL.
func startAdmin(t *testing.T, extra string, env map[string]string) string {
	t.Helper()
	up := echoUpstream(t)
	s := runSidecar(t, func(dir string) string {
		return fmt.Sprintf("listen: 127.0.0.1:0\nupstream: %q\ndatabase: { path: %q }\nmetrics: { listen: 127.0.0.1:0%s }\n",
			up.URL, filepath.Join(dir, "auth.db"), extra)
	}, env)
	return "http://" + s.AdminAddr().String()
}

func adminDo(t *testing.T, method, url string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

// TestAdminRefusesBrowsers: what a browser sends on a page's behalf (an
// Origin, a Sec-Fetch-Site other than none) gets 403 JSON on every admin
// route, POST /-/reload included; what operators' tools send is served.
func TestAdminRefusesBrowsers(t *testing.T) {
	admin := startAdmin(t, "", nil)
	browser := [][]string{
		{"Origin", "https://evil.example"},
		{"Origin", "null"},
		{"Origin", ""},
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Sec-Fetch-Site", "same-origin"},
		{"Sec-Fetch-Site", "none", "Origin", "http://127.0.0.1"},
	}
	for _, route := range []string{"POST /-/reload", "GET /metrics", "GET /healthz", "GET /readyz", "GET /nowhere"} {
		method, path, _ := strings.Cut(route, " ")
		for _, hdr := range browser {
			t.Run(route+" "+strings.Join(hdr, " "), func(t *testing.T) {
				status, body, h := adminDo(t, method, admin+path, hdr...)
				if status != 403 || h.Get("Content-Type") != "application/json" || !strings.Contains(body, `"code":"BROWSER_REQUEST_REFUSED"`) {
					t.Errorf("got %d %s %q, want 403 BROWSER_REQUEST_REFUSED", status, h.Get("Content-Type"), body)
				}
			})
		}
	}
	for _, tc := range []struct {
		route string
		hdr   []string
		want  int
	}{
		{"POST /-/reload", nil, 200},
		{"POST /-/reload", []string{"Sec-Fetch-Site", "none"}, 200},
		{"GET /metrics", []string{"Accept", "text/plain"}, 200},
		{"GET /healthz", nil, 200},
	} {
		method, path, _ := strings.Cut(tc.route, " ")
		if status, body, _ := adminDo(t, method, admin+path, tc.hdr...); status != tc.want {
			t.Errorf("%s %v: got %d %.80s, want %d", tc.route, tc.hdr, status, body, tc.want)
		}
	}
}

// TestAdminReloadToken: with metrics.reload_token_env, POST /-/reload
// needs that bearer token (401 JSON otherwise); the other admin routes do
// not; and a named variable that is unset or short stops start-up.
func TestAdminReloadToken(t *testing.T) {
	const token = "reload-token-0123456789abcdef"
	admin := startAdmin(t, ", reload_token_env: RELOAD_TOKEN", map[string]string{"RELOAD_TOKEN": token})
	for _, tc := range []struct {
		name string
		hdr  []string
		want int
	}{
		{"no token", nil, 401},
		{"wrong token", []string{"Authorization", "Bearer reload-token-0123456789abcdeX"}, 401},
		{"a prefix of it", []string{"Authorization", "Bearer reload-token"}, 401},
		{"not bearer", []string{"Authorization", "Basic " + token}, 401},
		{"two headers", []string{"Authorization", "Bearer " + token, "Authorization", "Bearer " + token}, 401},
		{"the token", []string{"Authorization", "Bearer " + token}, 200},
		{"the token from a page", []string{"Authorization", "Bearer " + token, "Origin", "https://evil.example"}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, h := adminDo(t, "POST", admin+"/-/reload", tc.hdr...)
			if status != tc.want {
				t.Fatalf("got %d %s, want %d", status, body, tc.want)
			}
			if status == 401 && (h.Get("WWW-Authenticate") == "" || !strings.Contains(body, `"code":"UNAUTHORIZED"`) || strings.Contains(body, token)) {
				t.Errorf("401: WWW-Authenticate %q, body %s", h.Get("WWW-Authenticate"), body)
			}
		})
	}
	if status, _, _ := adminDo(t, "GET", admin+"/metrics"); status != 200 {
		t.Errorf("GET /metrics without the token: got %d, want 200", status)
	}

	for _, env := range []map[string]string{nil, {"RELOAD_TOKEN": "short"}} {
		dir := t.TempDir()
		path := filepath.Join(dir, "sidecar.yaml")
		writeFile(t, path, fmt.Sprintf("listen: 127.0.0.1:0\ndatabase: { path: %q }\nmetrics: { listen: 127.0.0.1:0, reload_token_env: RELOAD_TOKEN }\n", filepath.Join(dir, "auth.db")))
		getenv := func(k string) string {
			if k == "AUTH_SECRET" {
				return e2eSecret
			}
			return env[k]
		}
		cfg, secret, _, err := LoadConfig(path, getenv)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := New(context.Background(), Options{Config: cfg, Secret: secret, Getenv: getenv, Log: io.Discard}); err == nil || !strings.Contains(err.Error(), "metrics.reload_token_env") {
			t.Errorf("RELOAD_TOKEN %q: New got %v, want an error naming metrics.reload_token_env", env["RELOAD_TOKEN"], err)
		}
	}
}
