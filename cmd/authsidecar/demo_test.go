package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDemo runs "authsidecar demo" as a newcomer would and follows the
// walkthrough it prints: sign-up, get-session, a business call that the
// echo upstream answers with the user id, and the same call refused.
func TestDemo(t *testing.T) {
	base, out, _ := startDemo(t)
	for _, want := range []string{"DEVELOPMENT USE ONLY", "sign-up/email", "get-session", "Authorization: Bearer", "$S/api/tasks"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("walkthrough lacks %q", want)
		}
	}
	post := func(path, body string) *http.Response {
		res, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	res := post("/api/auth/sign-up/email", `{"name":"Ann","email":"ann@example.com","password":"correct-horse-battery"}`)
	if res.StatusCode != 200 {
		t.Fatalf("sign-up: %d", res.StatusCode)
	}
	req, _ := http.NewRequest("GET", base+"/api/auth/get-session", nil)
	req.AddCookie(res.Cookies()[0])
	gs, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	gs.Body.Close()
	jwt := gs.Header.Get("Set-Auth-Jwt")
	req, _ = http.NewRequest("GET", base+"/api/tasks", nil)
	req.Header.Set("Authorization", "Bearer "+jwt)
	biz, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var echoed struct {
		Path   string `json:"path"`
		UserID string `json:"x_user_id"`
	}
	b, _ := io.ReadAll(biz.Body)
	biz.Body.Close()
	if err := json.Unmarshal(b, &echoed); err != nil || echoed.Path != "/api/tasks" || echoed.UserID == "" {
		t.Fatalf("echo: got %s, want the path and an X-User-Id", b)
	}
	if res, _ := http.Get(base + "/api/tasks"); res == nil || res.StatusCode != 401 {
		t.Fatalf("business call without a token: got %v, want 401", res)
	}
}

// startDemo runs "authsidecar demo" through run, as main does, until the
// test ends, and returns the base URL it printed, its stdout and stderr.
func startDemo(t *testing.T, flags ...string) (base string, out, errOut *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errOut = &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"demo"}, flags...), func(string) string { return "" }, strings.NewReader(""), out, errOut)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("demo returned %v", err)
		}
	})
	re := regexp.MustCompile(`running on (http://127\.0\.0\.1:\d+)`)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1], out, errOut
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo did not start:\n%s\n%s", out.String(), errOut.String())
		}
	}
}

// TestDemoConfig: "demo -config FILE" listens where the file says, on both
// listeners (it used to ignore the file).
func TestDemoConfig(t *testing.T) {
	port, metricsPort := freePort(t), freePort(t)
	path := filepath.Join(t.TempDir(), "demo.yaml")
	writeFile(t, path, fmt.Sprintf("listen: \"127.0.0.1:%d\"\nmetrics: { listen: \"127.0.0.1:%d\" }\n", port, metricsPort))
	base, _, _ := startDemo(t, "-config", path)
	if want := fmt.Sprintf("http://127.0.0.1:%d", port); base != want {
		t.Errorf("demo -config: running on %s, want %s (the file's listen)", base, want)
	}
	res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", metricsPort))
	if err != nil {
		t.Fatalf("the file's metrics.listen: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("readyz on the file's metrics.listen: got %d, want 200", res.StatusCode)
	}
}
