package mail

import (
	"bytes"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"os"
	"strings"
	texttemplate "text/template"
	"time"
	"unicode"
)

// TemplateFiles overrides the built-in templates of one Kind. Each field
// left "" keeps the built-in one. Templates are executed with the Message
// as data: {{.URL}}, {{.To}}, {{.TokenExpiresAt}}, {{.User.Name}},
// {{.User.Email}}, {{.User.ID}}, {{.Kind}}.
type TemplateFiles struct {
	// Subject is the subject line itself (a one-line text/template, not a
	// file name): subjects are short and live comfortably in the config.
	// Line breaks in the result are folded into spaces.
	Subject string
	// Text is the path of a text/template file for the text/plain part.
	Text string
	// HTML is the path of an html/template file for the text/html part;
	// html/template escapes every value for its context.
	HTML string
}

// Rendered is one message ready to send.
type Rendered struct {
	Subject string
	Text    string
	HTML    string
}

// Templates renders messages. The zero value is not usable; get one from
// LoadTemplates. A Templates is safe for concurrent use.
type Templates struct {
	byKind map[Kind]kindTemplates
}

type kindTemplates struct {
	subject *texttemplate.Template
	text    *texttemplate.Template
	html    *htmltemplate.Template
}

// DefaultTemplates returns the built-in templates.
func DefaultTemplates() *Templates {
	t, err := LoadTemplates(nil)
	if err != nil {
		panic(err) // the built-ins are tested; a failure here is a build defect
	}
	return t
}

// LoadTemplates reads the override files named in files (a missing kind or
// an empty field keeps the built-in template) and checks every template by
// executing it against a sample Message, so a template that parses but
// fails on use (a misspelt field, a bad function call) is refused at
// start-up, with its file name, rather than at the first password reset.
func LoadTemplates(files map[Kind]TemplateFiles) (*Templates, error) {
	var errs []error
	for k := range files {
		if !k.Valid() {
			errs = append(errs, fmt.Errorf("templates: unknown message type %q (want %s or %s)", k, PasswordReset, EmailVerification))
		}
	}
	t := &Templates{byKind: map[Kind]kindTemplates{}}
	for _, k := range Kinds() {
		f := files[k]
		b := builtin[k]
		var kt kindTemplates
		var err error

		subjectName, subjectSrc := "built-in "+string(k)+" subject", b.subject
		if f.Subject != "" {
			subjectName, subjectSrc = string(k)+" subject", f.Subject
		}
		if kt.subject, err = texttemplate.New(subjectName).Option("missingkey=error").Parse(subjectSrc); err != nil {
			errs = append(errs, fmt.Errorf("templates: %s: %w", subjectName, err))
		}

		textName, textSrc, err := source(f.Text, "built-in "+string(k)+" text", b.text)
		if err != nil {
			errs = append(errs, err)
		} else if kt.text, err = texttemplate.New(textName).Option("missingkey=error").Parse(textSrc); err != nil {
			errs = append(errs, fmt.Errorf("templates: %s: %w", textName, err))
		}

		htmlName, htmlSrc, err := source(f.HTML, "built-in "+string(k)+" html", b.html)
		if err != nil {
			errs = append(errs, err)
		} else if kt.html, err = htmltemplate.New(htmlName).Option("missingkey=error").Parse(htmlSrc); err != nil {
			errs = append(errs, fmt.Errorf("templates: %s: %w", htmlName, err))
		}

		if kt.subject != nil && kt.text != nil && kt.html != nil {
			t.byKind[k] = kt
			// The trial run: a sample message with every field set, so
			// a reference to a field that does not exist fails now.
			if _, err := t.Render(sample(k)); err != nil {
				errs = append(errs, fmt.Errorf("templates: %w", err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

// source returns the file's contents, or the built-in when path is "".
func source(path, builtinName, builtinSrc string) (name, src string, err error) {
	if path == "" {
		return builtinName, builtinSrc, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("templates: %w", err)
	}
	return path, string(b), nil
}

// sample is the message every template is tried on at load time.
func sample(k Kind) Message {
	return Message{
		Kind:           k,
		To:             "user@example.com",
		URL:            "https://app.example.com/api/auth/reset-password/SAMPLEtokenSAMPLEtokenSAMPLEtok?callbackURL=%2F",
		TokenExpiresAt: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC),
		User:           User{ID: "sample-user-id", Email: "user@example.com", Name: "Sample User"},
	}
}

// Render executes the templates of m.Kind. Errors name the template (its
// file for an override) and never include the message's fields.
// maxNameRunes bounds the user's name in a mail: it is whatever the user
// typed at sign-up, and a mail from the operator's sender must not carry
// a paragraph of it.
const maxNameRunes = 64

// displayName is the name as mails show it: one line (control characters
// and runs of white space folded into one space), at most maxNameRunes
// runes. Anyone may sign up with someone else's address, so the name is
// attacker-written text in a genuine mail; this keeps it to a greeting.
func displayName(s string) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if r := []rune(s); len(r) > maxNameRunes {
		s = string(r[:maxNameRunes-1]) + "…"
	}
	return s
}

func (t *Templates) Render(m Message) (Rendered, error) {
	kt, ok := t.byKind[m.Kind]
	if !ok {
		return Rendered{}, fmt.Errorf("render: unknown message type %q", m.Kind)
	}
	m.User.Name = displayName(m.User.Name)
	var r Rendered
	var buf bytes.Buffer
	if err := kt.subject.Execute(&buf, m); err != nil {
		return Rendered{}, fmt.Errorf("render %s: %w", kt.subject.Name(), err)
	}
	// A header must be one line; a user-chosen name with a line break in
	// an overridden subject must not start a new header. strings.Fields
	// also folds tabs and runs of spaces.
	r.Subject = strings.Join(strings.Fields(buf.String()), " ")
	if r.Subject == "" {
		return Rendered{}, fmt.Errorf("render %s: empty subject", kt.subject.Name())
	}
	buf.Reset()
	if err := kt.text.Execute(&buf, m); err != nil {
		return Rendered{}, fmt.Errorf("render %s: %w", kt.text.Name(), err)
	}
	r.Text = buf.String()
	buf.Reset()
	if err := kt.html.Execute(&buf, m); err != nil {
		return Rendered{}, fmt.Errorf("render %s: %w", kt.html.Name(), err)
	}
	r.HTML = buf.String()
	return r, nil
}
