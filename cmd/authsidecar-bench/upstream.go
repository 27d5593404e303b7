package main

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"flag"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// upstreamBody is what every business request gets: small and fixed, so
// the benchmark measures the proxies, not the app.
var upstreamBody = []byte(`{"tasks":[{"id":1,"title":"benchmark","done":false}]}` + "\n")

// runUpstream is the hidden "upstream" mode: the trivial app behind both
// proxies.
func runUpstream(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (127.0.0.1 only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return serveUntil(ctx, *listen, upstream{}, stdout, stderr)
}

// upstream answers every request with upstreamBody, and a WebSocket
// upgrade under /ws/ with 101 and an immediate close: scenario d measures
// the cost of opening a tunnel.
type upstream struct{}

var (
	jsonType      = []string{"application/json"}
	upstreamLen   = []string{strconv.Itoa(len(upstreamBody))}
	websocketGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11" // RFC 6455, section 1.3
)

func (upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/ws/") && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		upgradeAndClose(w, r)
		return
	}
	// The slices are shared and never modified: no allocation per request.
	h := w.Header()
	h["Content-Type"] = jsonType
	h["Content-Length"] = upstreamLen
	w.Write(upstreamBody)
}

func upgradeAndClose(w http.ResponseWriter, r *http.Request) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "cannot hijack", http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + websocketGUID))
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ")
	brw.WriteString(base64.StdEncoding.EncodeToString(sum[:]))
	brw.WriteString("\r\n\r\n")
	brw.Flush()
}
