package mail

import (
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestBuiltinTemplates(t *testing.T) {
	tpl := DefaultTemplates()
	for _, k := range Kinds() {
		t.Run(string(k), func(t *testing.T) {
			m := sampleMessage(k)
			m.URL += "&x=1" // an ampersand to see it escaped in HTML, intact in text
			r, err := tpl.Render(m)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if r.Subject == "" || strings.ContainsAny(r.Subject, "\r\n") {
				t.Errorf("subject %q: want one non-empty line", r.Subject)
			}
			if !strings.Contains(r.Text, m.URL) {
				t.Errorf("text part lacks the URL %q:\n%s", m.URL, r.Text)
			}
			if !strings.Contains(r.Text, "2030-01-02 03:04 UTC") {
				t.Errorf("text part lacks the expiry:\n%s", r.Text)
			}
			hrefs := regexp.MustCompile(`href="([^"]*)"`).FindAllStringSubmatch(r.HTML, -1)
			if len(hrefs) != 1 {
				t.Fatalf("got %d links in the HTML part, want 1:\n%s", len(hrefs), r.HTML)
			}
			if got := html.UnescapeString(hrefs[0][1]); got != m.URL {
				t.Errorf("href: got %q, want %q", got, m.URL)
			}
			if strings.Contains(r.HTML, "&x=1") {
				t.Errorf("HTML part has a raw '&' from the URL:\n%s", r.HTML)
			}
		})
	}
}

func TestTemplatesEscapeHostileName(t *testing.T) {
	tpl := DefaultTemplates()
	m := sampleMessage(PasswordReset)
	m.User.Name = `<script>alert("x")</script><a href="https://evil.example">click</a>`
	r, err := tpl.Render(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"<script", "evil.example\">", "<a href=\"https://evil"} {
		if strings.Contains(r.HTML, bad) {
			t.Errorf("HTML part contains %q unescaped:\n%s", bad, r.HTML)
		}
	}
	if !strings.Contains(r.HTML, "&lt;script&gt;") {
		t.Errorf("HTML part lacks the escaped name:\n%s", r.HTML)
	}
	// The text part is plain text: the name as given (folded to its
	// display form), which a mail client shows as text.
	if !strings.Contains(r.Text, displayName(m.User.Name)) {
		t.Errorf("text part lacks the name as given:\n%s", r.Text)
	}
}

// TestTemplatesFoldName: a name is the signer-up's text in a genuine mail
// (anyone may sign up with someone else's address), so it stays one short
// line: no paragraph of "security alert" under the greeting.
func TestTemplatesFoldName(t *testing.T) {
	m := sampleMessage(EmailVerification)
	m.User.Name = "Ann\n\nSecurity alert: your account is locked.\r\nRestore it at https://evil.example/ " + strings.Repeat("now ", 40) + "\u0085\u2028end"
	r, err := DefaultTemplates().Render(m)
	if err != nil {
		t.Fatal(err)
	}
	greeting, _, _ := strings.Cut(r.Text, "\n")
	if !strings.HasPrefix(greeting, "Hello Ann Security alert: your account is locked. Restore it at") || len([]rune(greeting)) > len("Hello ,")+maxNameRunes {
		t.Errorf("greeting %q: want the name on one line, at most %d runes", greeting, maxNameRunes)
	}
	for _, part := range []string{r.Text, r.HTML} {
		if strings.Contains(part, "\n\nSecurity alert") || strings.Contains(part, "end") && strings.Contains(part, "\u2028") {
			t.Errorf("the name's line breaks reached the mail:\n%s", part)
		}
	}
	for in, want := range map[string]string{"": "", "  Ann  Lee ": "Ann Lee", "a\tb\x00c": "a b c", strings.Repeat("é", 70): strings.Repeat("é", 63) + "…"} {
		if got := displayName(in); got != want {
			t.Errorf("displayName(%q) = %q, want %q", in, got, want)
		}
	}
}

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTemplateOverrides(t *testing.T) {
	dir := t.TempDir()
	files := map[Kind]TemplateFiles{
		PasswordReset: {
			Subject: "Acme: reset for {{.User.Name}}",
			Text:    write(t, dir, "reset.txt", "TEXT {{.User.Name}} {{.URL}}"),
			HTML:    write(t, dir, "reset.html", `<p>HTML {{.User.Name}} <a href="{{.URL}}">go</a></p>`),
		},
		// Only the HTML of verification is overridden: the rest stays built in.
		EmailVerification: {HTML: write(t, dir, "verify.html", `<b>VERIFY {{.To}}</b>`)},
	}
	tpl, err := LoadTemplates(files)
	if err != nil {
		t.Fatalf("LoadTemplates: %v", err)
	}
	m := sampleMessage(PasswordReset)
	m.User.Name = "Ada\r\nBcc: victim@example.com"
	r, err := tpl.Render(m)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Acme: reset for Ada Bcc: victim@example.com"; r.Subject != want {
		t.Errorf("subject: got %q, want %q (line breaks folded)", r.Subject, want)
	}
	// The name is folded to one line everywhere, body included.
	if want := "TEXT Ada Bcc: victim@example.com " + m.URL; r.Text != want {
		t.Errorf("text: got %q, want %q", r.Text, want)
	}
	if !strings.HasPrefix(r.HTML, "<p>HTML Ada") {
		t.Errorf("html: got %q", r.HTML)
	}

	v, err := tpl.Render(sampleMessage(EmailVerification))
	if err != nil {
		t.Fatal(err)
	}
	if v.HTML != "<b>VERIFY ada@example.com</b>" {
		t.Errorf("verification html: got %q", v.HTML)
	}
	builtin, _ := DefaultTemplates().Render(sampleMessage(EmailVerification))
	if v.Subject != builtin.Subject || v.Text != builtin.Text {
		t.Errorf("verification subject/text: got %q / %q, want the built-ins", v.Subject, v.Text)
	}
}

func TestTemplateOverridesRefused(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name  string
		files map[Kind]TemplateFiles
		want  []string // all must appear in the error
	}{
		{"text does not parse", map[Kind]TemplateFiles{
			PasswordReset: {Text: write(t, dir, "a.txt", "{{.URL")},
		}, []string{filepath.Join(dir, "a.txt"), "unclosed action"}},
		{"html does not parse", map[Kind]TemplateFiles{
			EmailVerification: {HTML: write(t, dir, "b.html", "{{if .URL}}x")},
		}, []string{filepath.Join(dir, "b.html"), "unexpected EOF"}},
		{"html names a field that does not exist", map[Kind]TemplateFiles{
			PasswordReset: {HTML: write(t, dir, "c.html", "<p>{{.Token}}</p>")},
		}, []string{filepath.Join(dir, "c.html"), "can't evaluate field Token"}},
		{"text calls a method wrongly", map[Kind]TemplateFiles{
			EmailVerification: {Text: write(t, dir, "d.txt", "{{.TokenExpiresAt.Format}}")},
		}, []string{filepath.Join(dir, "d.txt"), "Format"}},
		{"subject names a field that does not exist", map[Kind]TemplateFiles{
			PasswordReset: {Subject: "Hi {{.User.Nickname}}"},
		}, []string{"password_reset subject", "can't evaluate field Nickname"}},
		{"subject renders empty", map[Kind]TemplateFiles{
			PasswordReset: {Subject: "{{if false}}x{{end}}"},
		}, []string{"password_reset subject", "empty subject"}},
		{"file missing", map[Kind]TemplateFiles{
			PasswordReset: {Text: filepath.Join(dir, "nope.txt")},
		}, []string{filepath.Join(dir, "nope.txt"), "no such file"}},
		{"unknown kind", map[Kind]TemplateFiles{
			"newsletter": {Text: write(t, dir, "e.txt", "hi")},
		}, []string{`unknown message type "newsletter"`}},
		{"two broken, both reported", map[Kind]TemplateFiles{
			PasswordReset:     {Text: write(t, dir, "f.txt", "{{")},
			EmailVerification: {HTML: write(t, dir, "g.html", "{{.Nope}}")},
		}, []string{filepath.Join(dir, "f.txt"), filepath.Join(dir, "g.html")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := LoadTemplates(tt.files)
			if err == nil {
				t.Fatalf("LoadTemplates: got %v, nil error; want an error", tpl)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
