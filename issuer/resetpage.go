package issuer

import (
	"crypto/rand"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
)

// resetPagePath is the built-in page a reset link lands on when the
// client gave no redirectTo and auth.reset_page_url is not set: a legacy
// app with no page of its own still has a working flow. It is a plain
// HTML form (no script, no external asset) that posts back to itself.
const resetPagePath = "/reset-password-page"

var resetPage = template.Must(template.New("reset").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Reset your password</title>
<style nonce="{{.Nonce}}">
body{font:16px/1.5 system-ui,sans-serif;max-width:26rem;margin:4rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}label{display:block;margin:.8rem 0 .2rem}
input{width:100%;padding:.5rem;font:inherit;box-sizing:border-box}
button{margin-top:1rem;padding:.5rem 1rem;font:inherit}
.error{color:#a00}.done{color:#060}
</style>
</head>
<body>
<h1>Reset your password</h1>
{{if .Done}}<p class="done" id="done">Your password has been changed. You can now sign in with it.</p>
{{else}}{{if .Error}}<p class="error" id="error">{{.Error}}</p>{{end}}
{{if .Token}}<form method="post" action="{{.Action}}">
<input type="hidden" name="token" value="{{.Token}}">
<label for="newPassword">New password ({{.Min}} to {{.Max}} characters)</label>
<input id="newPassword" name="newPassword" type="password" autocomplete="new-password" minlength="{{.Min}}" maxlength="{{.Max}}" required>
<label for="confirmPassword">Repeat it</label>
<input id="confirmPassword" name="confirmPassword" type="password" autocomplete="new-password" minlength="{{.Min}}" maxlength="{{.Max}}" required>
<button type="submit">Set password</button>
</form>{{else}}<p>Ask for a new reset link from the sign-in page.</p>{{end}}{{end}}
</body>
</html>
`))

type resetPageData struct {
	Nonce, Action, Token, Error string
	Min, Max                    int
	Done                        bool
}

// resetPageGet shows the form for ?token=, or why there is none.
func (iss *Issuer) resetPageGet(w http.ResponseWriter, r *http.Request) *apiError {
	q := r.URL.Query()
	d := resetPageData{Token: q.Get("token")}
	if q.Get("error") != "" || d.Token == "" || len(d.Token) > maxTokenBytes {
		d.Token = ""
		d.Error = "This reset link is invalid, has expired or has been used already."
	}
	return iss.renderResetPage(w, http.StatusOK, d)
}

// resetPagePost takes the form (urlencoded, as a browser posts it) and
// sets the password.
func (iss *Issuer) resetPagePost(w http.ResponseWriter, r *http.Request) *apiError {
	if ok, wait := iss.tokenIP.allow(iss.clientIP(r)); !ok {
		return tooMany(w, wait)
	}
	r.Body = http.MaxBytesReader(w, r.Body, iss.bodyBytes)
	if err := r.ParseForm(); err != nil {
		return iss.renderResetPage(w, http.StatusBadRequest, resetPageData{Error: "The form could not be read."})
	}
	form := r.PostForm
	d := resetPageData{Token: form.Get("token")}
	password := form.Get("newPassword")
	switch {
	case d.Token == "" || len(d.Token) > maxTokenBytes:
		d.Token, d.Error = "", "This reset link is invalid, has expired or has been used already."
	case password != form.Get("confirmPassword"):
		d.Error = "The two passwords differ."
	default:
		if e := iss.checkPasswordLength(password); e != nil {
			d.Error = "The password must be " + strconv.Itoa(iss.minPw) + " to " + strconv.Itoa(iss.maxPw) + " characters long."
			break
		}
		switch e := iss.applyReset(w, r, d.Token, password); {
		case e == nil:
			d.Done = true
		case e == errInvalidResetToken:
			d.Token, d.Error = "", "This reset link is invalid, has expired or has been used already."
		default:
			return e
		}
	}
	status := http.StatusOK
	if d.Error != "" {
		status = http.StatusBadRequest
	}
	return iss.renderResetPage(w, status, d)
}

func (iss *Issuer) renderResetPage(w http.ResponseWriter, status int, d resetPageData) *apiError {
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		return errInternal(err)
	}
	d.Nonce = base64.RawStdEncoding.EncodeToString(n[:])
	d.Action = (&url.URL{Path: BasePath + resetPagePath}).String()
	d.Min, d.Max = iss.minPw, iss.maxPw
	h := w.Header()
	// Nothing but the page's own style and a form posting to itself; no
	// framing (clickjacking), no referrer (the URL holds the token), no cache.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'nonce-"+d.Nonce+"'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if err := resetPage.Execute(w, d); err != nil {
		iss.log.Error("reset page", "error", err.Error())
	}
	return nil
}
