package webclient

import (
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
)

// DemoApp is the app "authsidecar demo" puts behind the sidecar: the demo
// page at GET / (served through the sidecar, so the page and /api/auth are
// one origin), the WebSocket echo under /ws/, and for everything else
// Echo(name).
func DemoApp(name string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", DemoPage())
	mux.Handle("/ws/", EchoWebSocket())
	mux.Handle("/", Echo(name))
	return mux
}

// Echo is an upstream that answers with the request it received as JSON:
// method, path, the X-User-Id the sidecar set, and every header. name is
// said in each answer, so a walk through several upstreams shows which one
// answered.
func Echo(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		headers := map[string]string{}
		names := make([]string, 0, len(r.Header))
		for name := range r.Header {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			headers[name] = strings.Join(r.Header.Values(name), ", ")
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(struct {
			Upstream string            `json:"upstream"`
			Method   string            `json:"method"`
			Path     string            `json:"path"`
			UserID   string            `json:"x_user_id"`
			Headers  map[string]string `json:"headers"`
		}{name, r.Method, r.URL.Path, r.Header.Get("X-User-Id"), headers})
	})
}
