package betterauth

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// table is one of Better Auth's tables as this database has it: which of
// the columns the import knows are there, and which others (plugins').
type table struct {
	name string
	has  map[string]bool
}

// schema is the database's tables, by name.
type schema map[string]*table

// readSchema lists the tables and their columns.
func (s *Source) readSchema(ctx context.Context, tx *sql.Tx) (schema, error) {
	names, err := strings1(ctx, tx, s.tablesQuery())
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	sc := schema{}
	for _, name := range names {
		cols, err := strings1(ctx, tx, s.columnsQuery(), name)
		if err != nil {
			return nil, fmt.Errorf("list columns of %s: %w", name, err)
		}
		t := &table{name: name, has: map[string]bool{}}
		for _, c := range cols {
			t.has[c] = true
		}
		sc[name] = t
	}
	return sc, nil
}

// strings1 runs a query of one text column.
func strings1(ctx context.Context, tx *sql.Tx, q string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// columns are the columns of a table the import reads: those it needs,
// and those it reads when they are there (a plugin's, or optional in
// Better Auth's own schema).
type columns struct {
	required, optional []string
}

// The tables the import reads, with Better Auth 1.x's column names.
var (
	userColumns = columns{
		required: []string{"id", "name", "email", "emailVerified", "createdAt", "updatedAt"},
		optional: []string{"image", "role", "banned", "banReason", "banExpires"}, // role and ban*: the admin plugin's
	}
	accountColumns = columns{
		required: []string{"id", "accountId", "providerId", "userId", "createdAt", "updatedAt"},
		optional: []string{"password", "accessToken", "refreshToken", "idToken", "accessTokenExpiresAt", "refreshTokenExpiresAt", "scope"},
	}
	sessionColumns = columns{
		required: []string{"id", "token", "userId", "expiresAt", "createdAt", "updatedAt"},
		optional: []string{"ipAddress", "userAgent", "impersonatedBy"}, // impersonatedBy: the admin plugin's
	}
	jwksColumns = columns{
		required: []string{"id", "publicKey", "privateKey", "createdAt"},
		optional: []string{"expiresAt", "alg", "crv"},
	}
	verificationColumns = columns{required: []string{"id", "identifier", "value", "expiresAt"}, optional: []string{"createdAt", "updatedAt"}}
)

// check says what of cols the table lacks, and lists the columns it has
// that the import does not read.
func (t *table) check(cols columns) (missing, ignored []string) {
	for _, c := range cols.required {
		if !t.has[c] {
			missing = append(missing, c)
		}
	}
	for c := range t.has {
		if !slices.Contains(cols.required, c) && !slices.Contains(cols.optional, c) {
			ignored = append(ignored, t.name+"."+c)
		}
	}
	slices.Sort(ignored)
	return missing, ignored
}

// row is one row read: its values by column name; a column the table
// does not have reads as NULL.
type row struct {
	idx  map[string]int
	vals []any
}

func (r row) get(col string) any {
	if i, ok := r.idx[col]; ok {
		return r.vals[i]
	}
	return nil
}

// each reads every row of t, the columns of cols it has, in order, and
// calls fn with each.
func (t *table) each(ctx context.Context, tx *sql.Tx, cols columns, order string, fn func(row) error) error {
	var sel []string
	idx := map[string]int{}
	for _, c := range append(slices.Clip(cols.required), cols.optional...) {
		if t.has[c] {
			idx[c] = len(sel)
			sel = append(sel, quoteIdent(c))
		}
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+strings.Join(sel, ", ")+` FROM `+quoteIdent(t.name)+` ORDER BY `+order)
	if err != nil {
		return fmt.Errorf("read %s: %w", t.name, err)
	}
	defer rows.Close()
	for rows.Next() {
		r := row{idx: idx, vals: make([]any, len(sel))}
		ptrs := make([]any, len(sel))
		for i := range ptrs {
			ptrs[i] = &r.vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("read %s: %w", t.name, err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s: %w", t.name, err)
	}
	return nil
}

// count returns how many rows t holds, where is "" or a condition.
func (t *table) count(ctx context.Context, tx *sql.Tx) (int, error) {
	var n int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM `+quoteIdent(t.name)).Scan(&n)
	return n, err
}

// quoteIdent quotes a table or column name as both engines read it.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
