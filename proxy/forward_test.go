package proxy

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"reflect"
	"testing"
)

// setForwarded writes the headers itself for an untrusted peer, to save
// allocations on every request; it must write exactly what
// httputil.ProxyRequest.SetXForwarded would.
func TestSetForwardedMatchesSetXForwarded(t *testing.T) {
	p := &Proxy{}
	for _, tc := range []struct {
		remote, host string
		tls          bool
	}{
		{"203.0.113.7:51234", "app.example.com", false},
		{"[2001:db8::1]:443", "app.example.com:8443", true},
		{"not-an-address", "app.example.com", false},
		{"", "", false},
	} {
		in := httptest.NewRequest("GET", "http://x/api/tasks", nil)
		in.RemoteAddr, in.Host = tc.remote, tc.host
		if tc.tls {
			in.TLS = &tls.ConnectionState{}
		}
		want := &httputil.ProxyRequest{In: in, Out: &http.Request{Header: http.Header{"Accept": {"*/*"}}}}
		want.SetXForwarded()
		got := &httputil.ProxyRequest{In: in, Out: &http.Request{Header: http.Header{"Accept": {"*/*"}}}}
		p.setForwarded(got)
		if !reflect.DeepEqual(got.Out.Header, want.Out.Header) {
			t.Errorf("%+v:\n got  %v\n want %v", tc, got.Out.Header, want.Out.Header)
		}
	}
}
