// Package webclient is the browser side of authsidecar: the reference client
// authclient.js (served at GET /api/auth/client.js), the demo page and the
// demo upstream's WebSocket echo. The files are embedded in the binary.
package webclient

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"net/http"
	"time"
)

//go:embed authclient.js demo.html
var files embed.FS

// ClientPath is where the sidecar serves ClientJS.
const ClientPath = "/api/auth/client.js"

// ClientJS serves authclient.js, a dependency-free ES module implementing
// the contract's client side (sign-in awaits get-session, the JWT kept in
// localStorage "authToken", Bearer and ?token= injection). It is cacheable
// for five minutes and revalidated by ETag, so a new binary's client reaches
// browsers within that time.
func ClientJS() http.Handler {
	return newAsset("authclient.js", "text/javascript; charset=utf-8", "public, max-age=300")
}

// DemoPage serves the one-page demo app that "authsidecar demo" shows a
// newcomer. It imports ClientJS from its own origin, so it must be served
// through the sidecar (the demo upstream answers GET / with it).
func DemoPage() http.Handler {
	return newAsset("demo.html", "text/html; charset=utf-8", "no-cache")
}

// asset is one embedded file with a content-hash ETag. http.ServeContent
// answers If-None-Match with 304, HEAD, and Range.
type asset struct {
	name, contentType, cacheControl, etag string
	body                                  []byte
}

func newAsset(name, contentType, cacheControl string) *asset {
	b, err := files.ReadFile(name)
	if err != nil {
		panic("webclient: " + name + " not embedded: " + err.Error()) // a build mistake, caught by any test
	}
	sum := sha256.Sum256(b)
	return &asset{
		name: name, contentType: contentType, cacheControl: cacheControl,
		etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`,
		body: b,
	}
}

func (a *asset) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Cache-Control", a.cacheControl)
	h.Set("ETag", a.etag)
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
}
