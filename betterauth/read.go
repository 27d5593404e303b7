package betterauth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
)

// Options is what reading needs besides the database.
type Options struct {
	// BetterAuthSecret is the BETTER_AUTH_SECRET Better Auth ran with: it
	// opens the jwt() plugin's private keys and, under encryptOAuthTokens,
	// the provider tokens. Required.
	BetterAuthSecret []byte
	// AuthSecret is the sidecar's AUTH_SECRET: keys and provider tokens
	// are sealed with it. Required.
	AuthSecret []byte
	// Providers are the ids of the identity providers the sidecar is
	// configured with: a provider account is linked only when its
	// provider's id is one of them. Zero: none is.
	Providers []string
	// Now is the clock: sessions that expire before it are left behind.
	// Zero: time.Now.
	Now func() time.Time
}

// Result is what was read: the rows to write, and the report.
type Result struct {
	Snapshot issuer.Snapshot
	Report   Report
}

// ErrRefused: a user cannot be carried (an id or an address the sidecar
// does not take); the error lists them, and nothing may be written.
var ErrRefused = errors.New("users that cannot be carried")

// maxRefusals bounds the users an ErrRefused names.
const maxRefusals = 20

// The tables Better Auth's core and its jwt() plugin make; any other is
// a plugin's (or the application's), reported and left.
const (
	tUser         = "user"
	tAccount      = "account"
	tSession      = "session"
	tVerification = "verification"
	tJWKS         = "jwks"
)

// reader carries one Read.
type reader struct {
	o        Options
	now      time.Time
	rep      Report
	refused  []string
	users    map[string]issuer.User // carried, by id
	emails   map[string]string      // lower-cased address → user id
	accounts map[[2]string]bool     // provider id, account id
}

// Read reads the database in one read transaction.
func (s *Source) Read(ctx context.Context, o Options) (Result, error) {
	if len(o.BetterAuthSecret) == 0 || len(o.AuthSecret) == 0 {
		return Result{}, errors.New("betterauth: both secrets are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	rd := &reader{o: o, now: o.Now().UTC().Truncate(time.Millisecond), users: map[string]issuer.User{}, emails: map[string]string{}, accounts: map[[2]string]bool{}}
	tx, err := s.begin(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("%s: begin: %w", s, err)
	}
	defer tx.Rollback()
	sc, err := s.readSchema(ctx, tx)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", s, err)
	}
	if err := rd.checkSchema(sc); err != nil {
		return Result{}, fmt.Errorf("%s is not a Better Auth database: %w", s, err)
	}
	var snap issuer.Snapshot
	steps := []struct {
		t    *table
		cols columns
		fn   func(row) error
	}{
		{sc[tUser], userColumns, func(r row) error { return rd.user(r, &snap) }},
		{sc[tAccount], accountColumns, func(r row) error { return rd.account(r, &snap) }},
		{sc[tSession], sessionColumns, func(r row) error { return rd.session(r, &snap) }},
		{sc[tJWKS], jwksColumns, func(r row) error { return rd.key(r, &snap) }},
	}
	for _, st := range steps {
		if st.t == nil {
			continue // jwks: no jwt() plugin
		}
		order := `"createdAt", "id"`
		if err := st.t.each(ctx, tx, st.cols, order, st.fn); err != nil {
			return Result{}, fmt.Errorf("%s: %w", s, err)
		}
		if len(rd.refused) > 0 {
			break // the users are read first: nothing else matters then
		}
	}
	if len(rd.refused) > 0 {
		return Result{Report: rd.rep}, rd.refusal()
	}
	if err := rd.leftBehind(ctx, tx, sc); err != nil {
		return Result{}, fmt.Errorf("%s: %w", s, err)
	}
	return Result{Snapshot: snap, Report: rd.rep}, nil
}

// checkSchema wants Better Auth's core tables with their columns, and
// notes the columns it reads past.
func (rd *reader) checkSchema(sc schema) error {
	var problems []string
	for _, want := range []struct {
		name string
		cols columns
	}{{tUser, userColumns}, {tAccount, accountColumns}, {tSession, sessionColumns}, {tJWKS, jwksColumns}, {tVerification, verificationColumns}} {
		t := sc[want.name]
		if t == nil {
			if want.name != tJWKS && want.name != tVerification {
				problems = append(problems, fmt.Sprintf("no table %q", want.name))
			}
			continue
		}
		missing, ignored := t.check(want.cols)
		if len(missing) > 0 {
			problems = append(problems, fmt.Sprintf("table %q lacks the columns %s", want.name, strings.Join(missing, ", ")))
		}
		rd.rep.IgnoredColumns = append(rd.rep.IgnoredColumns, ignored...)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s (Better Auth's default schema is wanted: a renamed table or column, or snake_case, is not read)", strings.Join(problems, "; "))
	}
	return nil
}

// refusal is the error that names the users that cannot be carried.
func (rd *reader) refusal() error {
	lines := rd.refused
	more := ""
	if len(lines) > maxRefusals {
		more = fmt.Sprintf("\n  and %d more", len(lines)-maxRefusals)
		lines = lines[:maxRefusals]
	}
	return fmt.Errorf("%w: %d; fix them in Better Auth's database (or delete them) and import again:\n  %s%s",
		ErrRefused, len(rd.refused), strings.Join(lines, "\n  "), more)
}

// leftBehind reports the live verification rows (links Better Auth
// mailed) and the tables the import does not read, with their rows.
func (rd *reader) leftBehind(ctx context.Context, tx *sql.Tx, sc schema) error {
	if t := sc[tVerification]; t != nil {
		live := 0
		err := t.each(ctx, tx, columns{required: []string{"id", "expiresAt"}}, `"id"`, func(r row) error {
			if exp, err := instant(r.get("expiresAt")); err == nil && exp.After(rd.now) {
				live++
			}
			return nil
		})
		if err != nil {
			return err
		}
		rd.rep.note(live, "verification rows (links Better Auth mailed: password reset, email verification, magic links) are not carried: the users ask for them again")
	}
	for _, name := range sc.sorted() {
		switch name {
		case tUser, tAccount, tSession, tVerification, tJWKS:
			continue
		}
		n, err := sc[name].count(ctx, tx)
		if err != nil {
			return fmt.Errorf("count %s: %w", name, err)
		}
		rd.rep.Tables = append(rd.rep.Tables, TableRows{Name: name, Rows: n})
	}
	return nil
}

// sorted returns the names of sc, sorted.
func (sc schema) sorted() []string {
	var names []string
	for n := range sc {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
