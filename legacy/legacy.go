// Package legacy asks a legacy application whether an email and password
// are one of its users, for lazy migration (Auth0's automatic
// migration): the issuer calls it on a sign-in for an address it does
// not know, through the issuer.LegacySignIn it declares.
//
// The call is POST {"email","password"} to the configured URL with
// "Authorization: Bearer <secret>". 200 with {"id","email","name",
// "email_verified","roles"} is a user; 401 and 404 are "no"
// (issuer.ErrLegacyRefused); any other status, no answer in time or a
// transport error is issuer.ErrLegacyUnavailable; a 200 whose body is
// too large, not one JSON object, repeats a member or has a member of the
// wrong type is issuer.ErrLegacyInvalid. The issuer checks the user's
// fields themselves.
//
// As every outbound client of the sidecar (package idp), it is bounded in
// time (the whole exchange, body included) and size, and follows no
// redirect: a redirect would take the password to a URL nobody
// configured. No error holds the password, the secret, the URL (its
// path may hold a token) or the body.
package legacy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/authsidecar/authsidecar/internal/strictjson"
	"github.com/authsidecar/authsidecar/issuer"
)

// Options configure a Client.
type Options struct {
	// URL is the legacy application's sign-in endpoint: https, or http
	// to a loopback address only (the password travels to it). Required.
	URL string
	// Secret is sent as "Authorization: Bearer <Secret>", so the legacy
	// application answers the sidecar only. Required.
	Secret string
	// Timeout bounds one call, body included. Zero: 3s.
	Timeout time.Duration
	// MaxBodyBytes bounds the answer's body. Zero: 64 KiB.
	MaxBodyBytes int64
	// Transport sends the requests. Zero: a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper
}

// Client calls the legacy application. It is safe for concurrent use.
type Client struct {
	url    string
	secret string
	max    int64
	client *http.Client
}

// New checks o and returns its client. It contacts nothing.
func New(o Options) (*Client, error) {
	u, err := url.Parse(o.URL)
	if err != nil || u.Host == "" || u.User != nil {
		return nil, errors.New("legacy: the URL is not an absolute http(s) URL without userinfo")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && loopback(u.Hostname()):
	default:
		return nil, errors.New("legacy: the URL must be https, or http to a loopback address: passwords travel to it")
	}
	if o.Secret == "" {
		return nil, errors.New("legacy: no secret")
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Second
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 64 << 10
	}
	if o.Transport == nil {
		o.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	return &Client{url: o.URL, secret: o.Secret, max: o.MaxBodyBytes, client: &http.Client{
		Transport: o.Transport,
		Timeout:   o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}, nil
}

// loopback reports whether host is localhost or a loopback IP literal.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// SignIn asks the legacy application about email and password.
func (c *Client) SignIn(ctx context.Context, email, password string) (issuer.LegacyUser, error) {
	body, err := json.Marshal(struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}{email, password})
	if err != nil {
		return issuer.LegacyUser{}, fmt.Errorf("%w: encode: %v", issuer.ErrLegacyUnavailable, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return issuer.LegacyUser{}, fmt.Errorf("%w: request: %v", issuer.ErrLegacyUnavailable, bare(err))
	}
	req.Header.Set("Authorization", "Bearer "+c.secret)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "authsidecar")
	res, err := c.client.Do(req)
	if err != nil {
		return issuer.LegacyUser{}, fmt.Errorf("%w: %v", issuer.ErrLegacyUnavailable, bare(err))
	}
	defer res.Body.Close()
	switch res.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusNotFound:
		// The body says nothing the sidecar needs; the connection is kept
		// if what is left of it is small.
		io.Copy(io.Discard, io.LimitReader(res.Body, c.max))
		return issuer.LegacyUser{}, fmt.Errorf("%w: status %d", issuer.ErrLegacyRefused, res.StatusCode)
	default:
		return issuer.LegacyUser{}, fmt.Errorf("%w: status %d", issuer.ErrLegacyUnavailable, res.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, c.max+1))
	switch {
	case err != nil:
		// A body cut off or too slow to come: the application did not
		// finish its answer.
		return issuer.LegacyUser{}, fmt.Errorf("%w: read: %v", issuer.ErrLegacyUnavailable, bare(err))
	case int64(len(data)) > c.max:
		return issuer.LegacyUser{}, fmt.Errorf("%w: the body is larger than %d bytes", issuer.ErrLegacyInvalid, c.max)
	}
	u, err := decode(data)
	if err != nil {
		return issuer.LegacyUser{}, fmt.Errorf("%w: %v", issuer.ErrLegacyInvalid, err)
	}
	return u, nil
}

// bare drops the *url.Error around a transport error: it names the URL,
// which logs must not show.
func bare(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// decode reads the user from the answer's body: one JSON object, no
// repeated member, the known members by their exact names (encoding/json
// would also take "ID" for "id"), each of its type or null; other
// members are ignored. An id may be a string or an integer, kept as
// written ("42").
func decode(data []byte) (issuer.LegacyUser, error) {
	if !utf8.Valid(data) {
		return issuer.LegacyUser{}, errors.New("the body is not UTF-8")
	}
	var u issuer.LegacyUser
	err := strictjson.Members(data, func(name, value []byte) error {
		var err error
		switch string(name) {
		case "id":
			u.ID, err = decodeID(value)
		case "email":
			err = json.Unmarshal(value, &u.Email)
		case "name":
			err = json.Unmarshal(value, &u.Name)
		case "email_verified":
			err = json.Unmarshal(value, &u.EmailVerified)
		case "roles":
			err = json.Unmarshal(value, &u.Roles)
		default:
			return nil
		}
		if err != nil {
			return fmt.Errorf("member %q: want %s", name, want[string(name)])
		}
		return nil
	})
	if err != nil {
		return issuer.LegacyUser{}, err
	}
	return u, nil
}

// want names each member's type, for the errors.
var want = map[string]string{
	"id": "a string or an integer", "email": "a string", "name": "a string",
	"email_verified": "true or false", "roles": "a list of strings",
}

// decodeID reads an id written as a string or as an integer (a legacy
// table's serial key): "42" and 42 are the same id. A number with a
// fraction or an exponent is no id.
func decodeID(value []byte) (string, error) {
	if len(value) > 0 && value[0] != '"' {
		var n json.Number
		if err := json.Unmarshal(value, &n); err != nil || strings.ContainsAny(string(n), ".eE") {
			return "", errors.New("not an integer")
		}
		return string(n), nil
	}
	var s string
	err := json.Unmarshal(value, &s)
	return s, err
}
