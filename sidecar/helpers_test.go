package sidecar

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/authsidecar/authsidecar/internal/syncbuf"
)

const e2eSecret = "e2e-secret-0123456789abcdefghijklmnopqrstuvwxyz"

// syncBuffer collects a log that the sidecar writes while the test reads.
type syncBuffer = syncbuf.Buffer

// echoUpstream is the app behind the sidecar: it answers with the path and
// the user id it was given.
func echoUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"user": r.Header.Get("X-User-Id"), "path": r.URL.Path})
	}))
	t.Cleanup(up.Close)
	return up
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}
