package betterauth

import (
	"fmt"
	"io"
	"strings"
)

// Report is what a read found: what is carried, and what is not.
type Report struct {
	// What is carried.
	Users, Passwords, ProviderAccounts, Sessions, Keys, Roles, Bans int
	// ExpiredSessions were left behind: they sign nobody in.
	ExpiredSessions int
	// Notes say what is not carried, or carried with a change, each with
	// how many rows it concerns, in the order met.
	Notes []Note
	// IgnoredColumns are the columns read past, as table.column: plugins'
	// (twoFactorEnabled, username, …) or the application's.
	IgnoredColumns []string
	// Tables are the tables not read: plugins' (twoFactor, passkey,
	// organization, …) or the application's, with their rows.
	Tables []TableRows
}

// Note is one thing not carried, and how many rows it concerns.
type Note struct {
	Rows int
	What string
}

// TableRows is a table left as it is.
type TableRows struct {
	Name string
	Rows int
}

// note counts n rows under what, the sentence that says why.
func (r *Report) note(n int, what string) {
	if n == 0 {
		return
	}
	for i := range r.Notes {
		if r.Notes[i].What == what {
			r.Notes[i].Rows += n
			return
		}
	}
	r.Notes = append(r.Notes, Note{Rows: n, What: what})
}

// Write writes the report for the operator: the counts on one line, then
// one line for each thing not carried.
func (r Report) Write(w io.Writer) {
	fmt.Fprintf(w, "%s (%s with a password, %s banned), %s, %s (%s expired, left behind), %s, %s\n",
		plural(r.Users, "user"), count(r.Passwords), count(r.Bans), plural(r.ProviderAccounts, "provider account"),
		plural(r.Sessions, "live session"), count(r.ExpiredSessions), plural(r.Keys, "signing key"), plural(r.Roles, "role"))
	if len(r.Notes) == 0 && len(r.Tables) == 0 && len(r.IgnoredColumns) == 0 {
		fmt.Fprintln(w, "nothing left behind")
		return
	}
	fmt.Fprintln(w, "left behind:")
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  %s: %s\n", count(n.Rows), n.What)
	}
	for _, t := range r.Tables {
		fmt.Fprintf(w, "  table %s (%s): not read (a plugin's or the application's)\n", t.Name, plural(t.Rows, "row"))
	}
	if len(r.IgnoredColumns) > 0 {
		fmt.Fprintf(w, "  columns not read (plugins'): %s\n", strings.Join(r.IgnoredColumns, ", "))
	}
}

// count writes n with thousands separators: 1,000,000.
func count(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return count(n) + " " + noun + "s"
}
