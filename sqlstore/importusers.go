package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/authsidecar/authsidecar/userimport"
)

// ImportUsers writes one batch of users read by "users import", in one
// transaction: the users, the credential accounts of those with a
// password hash (stored as given: the issuer verifies it and upgrades it
// at the first sign-in), and their roles, granted as GrantRoleByEmail
// grants them. Each record's id and email are first looked up, and
// userimport.Decide says what the conflict mode makes of what exists;
// the unique constraints then settle a user written in between (a
// sign-up while the sidecar serves): such a record's outcome is
// userimport.Raced. A dry run looks up and decides, and writes nothing.
func (db *DB) ImportUsers(ctx context.Context, batch []userimport.Record, o userimport.BatchOptions) (userimport.BatchResult, error) {
	db.observe(ctx, "import_users")
	if o.DryRun {
		var res userimport.BatchResult
		ex, err := db.lookupImport(ctx, db.r, batch, "")
		if err != nil {
			return res, err
		}
		for _, d := range ex.decide(batch, o.OnConflict) {
			res.Outcomes = append(res.Outcomes, userimport.Outcome{Action: d.Action, Reason: d.Reason})
		}
		return res, nil
	}
	var res userimport.BatchResult
	err := db.withTx(ctx, func(t tx) error {
		lock := ""
		if o.OnConflict == userimport.Update {
			lock = db.dl.forUpdate // the users about to be updated
		}
		ex, err := db.lookupImport(ctx, t.Tx, batch, lock)
		if err != nil {
			return err
		}
		decisions := ex.decide(batch, o.OnConflict)
		if importHooks.afterLookup != nil {
			if err := importHooks.afterLookup(ctx, t); err != nil {
				return err
			}
		}
		res, err = writeImport(ctx, t, batch, decisions, ex, o)
		return err
	})
	if err != nil {
		return userimport.BatchResult{}, fmt.Errorf("import users: %w", err)
	}
	return res, nil
}

// importHooks let a test write, in the batch's transaction, between the
// lookup and the inserts: a sign-up that raced the import.
var importHooks struct {
	afterLookup func(context.Context, tx) error
}

// existing is what a batch found in the store: the users with its given
// ids, and the users claiming its emails.
type existing struct {
	byID, byEmail map[string]userimport.Existing
}

// lookupImport reads the users a batch's ids and emails name; lock ends
// the queries (FOR UPDATE, or nothing).
func (db *DB) lookupImport(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, batch []userimport.Record, lock string) (existing, error) {
	ex := existing{byID: map[string]userimport.Existing{}, byEmail: map[string]userimport.Existing{}}
	var ids, emails []any
	for i := range batch {
		if !batch[i].GeneratedID {
			ids = append(ids, batch[i].ID)
		}
		emails = append(emails, batch[i].Email)
	}
	read := func(m map[string]userimport.Existing, byEmail bool, query string, args []any) error {
		for len(args) > 0 {
			n := min(len(args), stmtRows)
			rows, err := q.QueryContext(ctx, db.q(query+placeholders(n)+`)`+claimedIf(byEmail)+lock), args[:n]...)
			if err != nil {
				return fmt.Errorf("look up users: %w", err)
			}
			for rows.Next() {
				var u userimport.Existing
				if err := rows.Scan(&u.ID, &u.Email); err != nil {
					rows.Close()
					return fmt.Errorf("look up users: %w", err)
				}
				if byEmail {
					m[u.Email] = u
				} else {
					m[u.ID] = u
				}
			}
			if err := rows.Close(); err != nil {
				return fmt.Errorf("look up users: %w", err)
			}
			args = args[n:]
		}
		return nil
	}
	if err := read(ex.byID, false, `SELECT id, email FROM "user" WHERE id IN (`, ids); err != nil {
		return ex, err
	}
	return ex, read(ex.byEmail, true, `SELECT id, email FROM "user" WHERE email IN (`, emails)
}

// claimedIf limits an email lookup to the users who claim the address:
// an unclaimed one reserves nothing, for an import as for a sign-up.
func claimedIf(byEmail bool) string {
	if byEmail {
		return ` AND NOT email_unclaimed`
	}
	return ""
}

func (ex existing) decide(batch []userimport.Record, mode userimport.Conflict) []userimport.Decision {
	out := make([]userimport.Decision, len(batch))
	for i := range batch {
		r := &batch[i]
		var byID, byEmail *userimport.Existing
		if u, ok := ex.byID[r.ID]; ok && !r.GeneratedID {
			byID = &u
		}
		if u, ok := ex.byEmail[r.Email]; ok {
			byEmail = &u
		}
		out[i] = userimport.Decide(*r, byID, byEmail, mode)
	}
	return out
}

// writeImport writes what decisions say, in t.
func writeImport(ctx context.Context, t tx, batch []userimport.Record, decisions []userimport.Decision, ex existing, o userimport.BatchOptions) (userimport.BatchResult, error) {
	res := userimport.BatchResult{Outcomes: make([]userimport.Outcome, len(batch))}
	now := ms(o.Now)
	var users, accounts, roles []any
	var inserts []int
	for i, d := range decisions {
		res.Outcomes[i] = userimport.Outcome{Action: d.Action, Reason: d.Reason}
		if d.Action == userimport.Imported {
			inserts = append(inserts, i)
		}
	}
	// Rows go in in the order of the index most of their table's indexes
	// follow: users by email (two of its three), accounts and roles by
	// user id (all of theirs). Consecutive keys land in the same index
	// pages, so each page is read and written once a batch, where random
	// order made the import twice as slow.
	slices.SortFunc(inserts, func(a, b int) int { return strings.Compare(batch[a].Email, batch[b].Email) })
	for _, i := range inserts {
		r := &batch[i]
		users = append(users, r.ID, r.Name, r.Email, r.EmailVerified, r.Image, ms(r.CreatedAt), now)
	}
	written, err := insertUsers(ctx, t, users)
	if err != nil {
		return res, err
	}
	slices.SortFunc(inserts, func(a, b int) int { return strings.Compare(batch[a].ID, batch[b].ID) })
	for _, i := range inserts {
		r := &batch[i]
		if !written[r.ID] {
			res.Outcomes[i] = userimport.Raced(o.OnConflict)
			continue
		}
		if r.PasswordHash != "" {
			// CreateUser's credential account: derived id, account_id the
			// user id.
			accounts = append(accounts, "cred_"+r.ID, r.ID, r.ID, r.PasswordHash, ms(r.CreatedAt), now)
		}
		for _, role := range r.Roles {
			roles = append(roles, r.ID, role, now)
		}
	}
	if _, err := insertRows(ctx, t, `INSERT INTO account (id, account_id, provider_id, user_id, password, created_at, updated_at) VALUES `,
		`(?, ?, 'credential', ?, ?, ?, ?)`, "", 6, accounts); err != nil {
		return res, fmt.Errorf("insert accounts: %w", err)
	}
	for i, d := range decisions {
		if d.Action != userimport.Updated {
			continue
		}
		r := &batch[i]
		if err := updateImported(ctx, t, r, ex.byEmailOrID(d.Target, r), o.Now); err != nil {
			return res, err
		}
		for _, role := range r.Roles {
			roles = append(roles, d.Target, role, now)
		}
	}
	n, err := insertRows(ctx, t, `INSERT INTO user_role (user_id, role, created_at) VALUES `, `(?, ?, ?)`, ` ON CONFLICT DO NOTHING`, 3, roles)
	if err != nil {
		return res, fmt.Errorf("grant roles: %w", err)
	}
	res.RolesGranted = int(n)
	return res, nil
}

// byEmailOrID returns the existing user an update targets.
func (ex existing) byEmailOrID(id string, r *userimport.Record) userimport.Existing {
	if u, ok := ex.byID[id]; ok {
		return u
	}
	return ex.byEmail[r.Email]
}

// insertUsers inserts rows of 7 values (id, name, email, email_verified,
// image, created_at, updated_at) and returns the ids written: a row
// whose id or claimed email exists is passed over (ON CONFLICT DO
// NOTHING covers the partial unique index on email too).
func insertUsers(ctx context.Context, t tx, args []any) (map[string]bool, error) {
	const cols = 7
	written := make(map[string]bool, len(args)/cols)
	for len(args) > 0 {
		n := min(len(args), stmtRows*cols)
		rows, err := t.query(ctx, `INSERT INTO "user" (id, name, email, email_verified, image, created_at, updated_at) VALUES `+
			tuples(`(?, ?, ?, ?, ?, ?, ?)`, n/cols)+` ON CONFLICT DO NOTHING RETURNING id`, args[:n]...)
		if err != nil {
			return nil, fmt.Errorf("insert users: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("insert users: %w", err)
			}
			written[id] = true
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("insert users: %w", err)
		}
		args = args[n:]
	}
	return written, nil
}

// insertRows inserts rows of cols values each, as few statements as the
// engines' bound on parameters allows, and returns the rows written.
func insertRows(ctx context.Context, t tx, head, tuple, tail string, cols int, args []any) (int64, error) {
	var total int64
	for len(args) > 0 {
		n := min(len(args), stmtRows*cols)
		res, err := t.exec(ctx, head+tuples(tuple, n/cols)+tail, args[:n]...)
		if err != nil {
			return total, err
		}
		affected, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += affected
		args = args[n:]
	}
	return total, nil
}

// updateImported writes r over the existing user u: the fields the line
// gave, its email (when it changes, the address is unverified unless the
// line says otherwise), claimed; a password hash replaces the
// credential's, or makes one, as a reset does. Sessions are kept, as
// "users set-password" keeps them.
func updateImported(ctx context.Context, t tx, r *userimport.Record, u userimport.Existing, now time.Time) error {
	set := []string{`email = ?`, `email_unclaimed = ?`, `updated_at = ?`}
	args := []any{r.Email, false, ms(now)}
	add := func(col string, v any) {
		set = append(set, col+` = ?`)
		args = append(args, v)
	}
	if r.Given.Has(userimport.FieldName) {
		add("name", r.Name)
	}
	if r.Given.Has(userimport.FieldImage) {
		add("image", r.Image)
	}
	if r.Given.Has(userimport.FieldCreatedAt) {
		add("created_at", ms(r.CreatedAt))
	}
	if r.Given.Has(userimport.FieldEmailVerified) || r.Email != u.Email {
		add("email_verified", r.EmailVerified)
	}
	if _, err := t.exec(ctx, `UPDATE "user" SET `+strings.Join(set, ", ")+` WHERE id = ?`, append(args, u.ID)...); err != nil {
		return fmt.Errorf("update user %s: %w", u.ID, err)
	}
	if r.PasswordHash == "" {
		return nil
	}
	res, err := t.exec(ctx, `UPDATE account SET password = ?, updated_at = ? WHERE user_id = ? AND provider_id = 'credential'`,
		r.PasswordHash, ms(now), u.ID)
	if err != nil {
		return fmt.Errorf("update password of %s: %w", u.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update password of %s: %w", u.ID, err)
	} else if n > 0 {
		return nil
	}
	if _, err := t.exec(ctx,
		`INSERT INTO account (id, account_id, provider_id, user_id, password, created_at, updated_at) VALUES (?, ?, 'credential', ?, ?, ?, ?)`,
		"cred_"+u.ID, u.ID, u.ID, r.PasswordHash, ms(now), ms(now)); err != nil {
		return fmt.Errorf("insert credential of %s: %w", u.ID, err)
	}
	return nil
}

// stmtRows is the rows one statement inserts or looks up at most: few
// enough that its parameters stay far below the engines' bounds (SQLite
// allows 32,766, PostgreSQL 65,535) and that SQLite's compiled statement
// stays small (a statement of 10,000 rows took 20 MiB), many enough that
// a batch takes a few statements, not thousands.
const stmtRows = 500

// tuples repeats tuple n times, comma-separated.
func tuples(tuple string, n int) string {
	var b strings.Builder
	b.Grow(n * (len(tuple) + 2))
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(tuple)
	}
	return b.String()
}

// placeholders is n "?" comma-separated.
func placeholders(n int) string { return tuples("?", n) }
