package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/authsidecar/authsidecar/mail"
)

// The outbox is the durable mail queue: IssueRecoveryToken writes a row in
// the token's transaction, and each replica's mail worker claims due rows
// with a lease, delivers them, and acknowledges or fails them. A row is
// claimed by one owner at a time: on PostgreSQL the claim's SELECT takes
// its rows FOR UPDATE SKIP LOCKED, so replicas claiming at once pass over
// each other's rows instead of taking them too; SQLite serializes writers.

// Outbox states, as the schema's CHECK spells them.
const (
	outboxPending   = "pending"
	outboxDelivered = "delivered"
	outboxDead      = "dead"
)

// How long finished rows stay for "outbox list" before the sweep deletes
// them; they hold no payload, only what happened.
const (
	// outboxKeepDelivered: a week of deliveries answers "did the mail to
	// X go out?" for the support ticket of the week.
	outboxKeepDelivered = 7 * 24 * time.Hour
	// outboxKeepDead: failures are what an operator must see, even back
	// from a long holiday; the month is counted from the row's death.
	outboxKeepDead = 30 * 24 * time.Hour
)

// maxLastError bounds the stored last_error: a failing server's answer is
// not ours to store in full, however long it is.
const maxLastError = 1000

const queuedColumns = `id, kind, user_id, payload, state, attempts, created_at, next_attempt_at, last_error, delivered_at`

func scanQueued(sc interface{ Scan(...any) error }, withPayload bool) (mail.Queued, error) {
	var q mail.Queued
	var kind string
	var created, next int64
	var delivered sql.NullInt64
	dest := []any{&q.ID, &kind, &q.UserID, &q.Sealed, &q.State, &q.Attempts, &created, &next, &q.LastError, &delivered}
	if !withPayload {
		dest = slices.Delete(dest, 3, 4)
	}
	if err := sc.Scan(dest...); err != nil {
		return mail.Queued{}, err
	}
	q.Kind = mail.Kind(kind)
	q.CreatedAt, q.NextAttemptAt, q.DeliveredAt = fromMS(created), fromMS(next), fromNullMS(delivered)
	if len(q.Sealed) == 0 {
		q.Sealed = nil
	}
	return q, nil
}

// insertOutbox inserts q as it is, without a lease.
func insertOutbox(ctx context.Context, ex execer, q mail.Queued) error {
	var payload []byte
	if len(q.Sealed) > 0 {
		payload = q.Sealed
	}
	_, err := ex.exec(ctx,
		`INSERT INTO outbox (id, kind, user_id, payload, state, attempts, created_at, next_attempt_at, last_error, delivered_at)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		q.ID, string(q.Kind), q.UserID, payload, q.State, q.Attempts, ms(q.CreatedAt), ms(q.NextAttemptAt), cleanLastError(q.LastError), nullMS(q.DeliveredAt))
	if err != nil {
		return fmt.Errorf("insert outbox %s: %w", q.ID, err)
	}
	return nil
}

// ClaimOutbox leases up to n pending rows due at now (next_attempt_at <=
// now) whose lease, if any, has expired (lease_until <= now), to owner
// until now+lease, and counts an attempt on each, in one statement; they
// are returned oldest next_attempt_at first, with their payload and the
// attempt being made. The claim counts it, not the outcome: a message
// whose every try kills the process that claimed it still reaches
// email.max_attempts. owner must be unique to the claiming process: it is
// what Ack, Fail, Release and Renew check. One claim in sweepEvery also
// runs SweepOutbox, after the claim.
func (db *DB) ClaimOutbox(ctx context.Context, owner string, n int, lease time.Duration, now time.Time) ([]mail.Queued, error) {
	db.observe(ctx, "claim_outbox")
	if owner == "" || lease <= 0 {
		return nil, fmt.Errorf("claim outbox: owner %q and lease %v: want an owner and a positive lease", owner, lease)
	}
	if n <= 0 {
		return nil, nil
	}
	// The CTE is evaluated once (MATERIALIZED, which both engines accept,
	// keeps PostgreSQL from folding it into the UPDATE): the rows it
	// locks are the rows updated.
	// On PostgreSQL its FOR UPDATE re-checks each row's WHERE on the
	// latest version, so a row another replica claimed and committed
	// since this statement's snapshot is dropped, not claimed twice.
	rows, err := db.w.QueryContext(ctx, db.q(
		`WITH picked AS MATERIALIZED (
			SELECT id FROM outbox
			WHERE state = 'pending' AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?)
			ORDER BY next_attempt_at, id LIMIT ?`+db.dl.skipLocked+`
		)
		UPDATE outbox SET lease_owner = ?, lease_until = ?, attempts = attempts + 1
		WHERE id IN (SELECT id FROM picked)
		RETURNING `+queuedColumns),
		ms(now), ms(now), n, owner, ms(now.Add(lease)))
	if err != nil {
		return nil, fmt.Errorf("claim outbox: %w", err)
	}
	var out []mail.Queued
	for rows.Next() {
		q, err := scanQueued(rows, true)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("claim outbox: %w", err)
		}
		out = append(out, q)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, fmt.Errorf("claim outbox: %w", err)
	}
	// RETURNING has no order of its own.
	slices.SortFunc(out, func(a, b mail.Queued) int {
		if c := a.NextAttemptAt.Compare(b.NextAttemptAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	// As TakeToken's sweep: outside the claim, its error is not the
	// caller's (the next sweep does the work).
	if db.claims.Add(1)%sweepEvery == 0 {
		db.sweepOutbox(ctx, now)
	}
	return out, nil
}

// AckOutbox marks the row delivered at now and deletes its payload, in one
// statement, while it is pending and owner's claim: mail.ErrLeaseLost when
// another owner has claimed it since (after owner's lease expired), or it
// is no longer pending. An owner whose lease expired but whom nobody has
// replaced may still acknowledge: the message went, and acknowledging it
// is what keeps it from going twice.
func (db *DB) AckOutbox(ctx context.Context, id, owner string, now time.Time) error {
	db.observe(ctx, "ack_outbox")
	res, err := db.exec(ctx,
		`UPDATE outbox SET state = 'delivered', payload = NULL, delivered_at = ?, lease_owner = NULL, lease_until = NULL
		 WHERE id = ? AND state = 'pending' AND lease_owner = ?`, ms(now), id, owner)
	return leaseResult(res, err, "ack outbox", id)
}

// FailOutbox records a failed attempt, while the row is pending and
// owner's claim (mail.ErrLeaseLost otherwise, as for AckOutbox): lastErr
// (made valid UTF-8 without NUL, cut to 1000 bytes) and the lease
// cleared; the row is due again at next. The attempt was counted by the
// claim. With dead, the row is
// dead instead and its payload deleted in the same statement; next is
// not used then, and next_attempt_at records now, the time of death,
// which is what SweepOutbox ages dead rows by.
func (db *DB) FailOutbox(ctx context.Context, id, owner string, next time.Time, lastErr string, dead bool, now time.Time) error {
	db.observe(ctx, "fail_outbox")
	q := `UPDATE outbox SET last_error = ?, next_attempt_at = ?, lease_owner = NULL, lease_until = NULL
		  WHERE id = ? AND state = 'pending' AND lease_owner = ?`
	if dead {
		q = `UPDATE outbox SET last_error = ?, next_attempt_at = ?, lease_owner = NULL, lease_until = NULL, state = 'dead', payload = NULL
		     WHERE id = ? AND state = 'pending' AND lease_owner = ?`
		next = now
	}
	res, err := db.exec(ctx, q, cleanLastError(lastErr), ms(next), id, owner)
	return leaseResult(res, err, "fail outbox", id)
}

// ReleaseOutbox gives a claimed row back, due at once, and takes back
// the attempt its claim counted: a worker stopping with rows it has not
// sent hands them to the next claim instead of leaving them leased until
// the lease ends. mail.ErrLeaseLost when the row is not owner's pending
// claim.
func (db *DB) ReleaseOutbox(ctx context.Context, id, owner string) error {
	db.observe(ctx, "release_outbox")
	res, err := db.exec(ctx,
		`UPDATE outbox SET lease_owner = NULL, lease_until = NULL, attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END
		 WHERE id = ? AND state = 'pending' AND lease_owner = ?`, id, owner)
	return leaseResult(res, err, "release outbox", id)
}

// RenewOutbox moves the lease of every pending row owner holds to until,
// in one statement, and returns how many it renewed. A worker renews
// while it delivers a batch, so its lease can be short: the rows of a
// process that died without a word (kill -9) are free one lease after
// its last renewal, while a live one keeps its rows however long its
// sends take.
func (db *DB) RenewOutbox(ctx context.Context, owner string, until time.Time) (int, error) {
	db.observe(ctx, "renew_outbox")
	if owner == "" {
		return 0, fmt.Errorf("renew outbox: no owner")
	}
	res, err := db.exec(ctx,
		`UPDATE outbox SET lease_until = ? WHERE lease_owner = ? AND state = 'pending'`, ms(until), owner)
	if err != nil {
		return 0, fmt.Errorf("renew outbox: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("renew outbox: %w", err)
	}
	return int(n), nil
}

func leaseResult(res sql.Result, err error, op, id string) error {
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, id, err)
	}
	if n == 0 {
		return fmt.Errorf("%s %s: %w", op, id, mail.ErrLeaseLost)
	}
	return nil
}

// cleanLastError makes an error text storable alike on both engines:
// PostgreSQL's TEXT refuses NUL and invalid UTF-8, which a remote server's
// answer may hold.
func cleanLastError(s string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) <= maxLastError {
		return s
	}
	cut := maxLastError
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// OldestPending is the created_at of the oldest pending row; ok is false
// when there is none.
func (db *DB) OldestPending(ctx context.Context) (t time.Time, ok bool, err error) {
	db.observe(ctx, "oldest_pending")
	var v sql.NullInt64
	if err := db.queryRow(ctx, `SELECT min(created_at) FROM outbox WHERE state = 'pending'`).Scan(&v); err != nil {
		return time.Time{}, false, fmt.Errorf("oldest pending: %w", err)
	}
	return fromNullMS(v), v.Valid, nil
}

// ListOutbox returns the rows in state ("pending", "delivered" or "dead";
// "" for all), newest first (created_at, then id, descending), without
// their payload: Sealed is always nil.
func (db *DB) ListOutbox(ctx context.Context, state string) ([]mail.Queued, error) {
	db.observe(ctx, "list_outbox")
	q := `SELECT id, kind, user_id, state, attempts, created_at, next_attempt_at, last_error, delivered_at FROM outbox`
	var args []any
	switch state {
	case "":
	case outboxPending, outboxDelivered, outboxDead:
		q += ` WHERE state = ?`
		args = append(args, state)
	default:
		return nil, fmt.Errorf("list outbox: unknown state %q (want pending, delivered or dead)", state)
	}
	rows, err := db.query(ctx, q+` ORDER BY created_at DESC, id DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("list outbox: %w", err)
	}
	defer rows.Close()
	out := []mail.Queued{}
	for rows.Next() {
		m, err := scanQueued(rows, false)
		if err != nil {
			return nil, fmt.Errorf("list outbox: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list outbox: %w", err)
	}
	return out, nil
}

// RetryOutbox makes a pending or dead row pending again, due at now with
// no attempts counted, but only while it still has its payload; it
// reports whether it did. A dead row's payload is deleted when it dies,
// so a dead message cannot be sent again: the user asks for a new link
// (or the operator makes one). A lease the row holds stays: its owner is
// still delivering it, and acknowledges or fails it as before.
func (db *DB) RetryOutbox(ctx context.Context, id string, now time.Time) (bool, error) {
	db.observe(ctx, "retry_outbox")
	res, err := db.exec(ctx,
		`UPDATE outbox SET state = 'pending', attempts = 0, next_attempt_at = ?
		 WHERE id = ? AND state IN ('pending', 'dead') AND payload IS NOT NULL`, ms(now), id)
	if err != nil {
		return false, fmt.Errorf("retry outbox %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("retry outbox %s: %w", id, err)
	}
	return n > 0, nil
}

// SweepOutbox deletes delivered rows delivered more than
// outboxKeepDelivered (7 days) before now and dead rows dead more than
// outboxKeepDead (30 days) before now, and returns how many it deleted.
// ClaimOutbox runs it now and then; pending rows are never swept.
func (db *DB) SweepOutbox(ctx context.Context, now time.Time) (int, error) {
	db.observe(ctx, "sweep_outbox")
	return db.sweepOutbox(ctx, now)
}

func (db *DB) sweepOutbox(ctx context.Context, now time.Time) (int, error) {
	res, err := db.exec(ctx,
		`DELETE FROM outbox WHERE id IN (
			SELECT id FROM outbox
			WHERE (state = 'delivered' AND delivered_at < ?) OR (state = 'dead' AND next_attempt_at < ?)`+db.dl.skipLocked+`
		)`, ms(now.Add(-outboxKeepDelivered)), ms(now.Add(-outboxKeepDead)))
	if err != nil {
		return 0, fmt.Errorf("sweep outbox: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sweep outbox: %w", err)
	}
	return int(n), nil
}
