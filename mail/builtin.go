package mail

// builtin holds the built-in templates: plain, short, and with the link as
// text as well as a button, since some mail clients strip links.
var builtin = map[Kind]struct{ subject, text, html string }{
	PasswordReset: {
		subject: `Reset your password`,
		text: `Hello{{if .User.Name}} {{.User.Name}}{{end}},

Someone asked to reset the password of the account for {{.To}}.
To choose a new password, open this link:

{{.URL}}

The link works once, until {{.TokenExpiresAt.UTC.Format "2006-01-02 15:04 MST"}}.
If you did not ask for this, ignore this message: your password stays as it is.
`,
		html: htmlHead + `<p>Hello{{if .User.Name}} {{.User.Name}}{{end}},</p>
<p>Someone asked to reset the password of the account for {{.To}}.
To choose a new password, follow this link:</p>
<p><a href="{{.URL}}">Reset your password</a></p>
<p>Or copy this address into your browser:<br>{{.URL}}</p>
<p>The link works once, until {{.TokenExpiresAt.UTC.Format "2006-01-02 15:04 MST"}}.
If you did not ask for this, ignore this message: your password stays as it is.</p>
` + htmlTail,
	},
	EmailVerification: {
		subject: `Verify your email address`,
		text: `Hello{{if .User.Name}} {{.User.Name}}{{end}},

Please confirm that {{.To}} is your email address by opening this link:

{{.URL}}

The link works until {{.TokenExpiresAt.UTC.Format "2006-01-02 15:04 MST"}}.
If you did not create an account, ignore this message.
`,
		html: htmlHead + `<p>Hello{{if .User.Name}} {{.User.Name}}{{end}},</p>
<p>Please confirm that {{.To}} is your email address by following this link:</p>
<p><a href="{{.URL}}">Verify your email address</a></p>
<p>Or copy this address into your browser:<br>{{.URL}}</p>
<p>The link works until {{.TokenExpiresAt.UTC.Format "2006-01-02 15:04 MST"}}.
If you did not create an account, ignore this message.</p>
` + htmlTail,
	},
}

const htmlHead = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"></head>
<body style="font-family: sans-serif; line-height: 1.5">
`

const htmlTail = `</body></html>
`
