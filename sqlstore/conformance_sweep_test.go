package sqlstore_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/mail"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// sweeper returns a sweeper of db whose clock reads now, deleting in
// batches of batch, with revocations kept revTTL (0: not swept).
func sweeper(t *testing.T, db *sqlstore.DB, now time.Time, batch int, revTTL time.Duration, reg prometheus.Registerer, log io.Writer) *sqlstore.Sweeper {
	t.Helper()
	if log == nil {
		log = io.Discard
	}
	s, err := sqlstore.NewSweeper(db, sqlstore.SweeperOptions{
		Batch: batch, RevocationTTL: revTTL, Registerer: reg,
		Logger: slog.New(slog.NewJSONHandler(log, nil)), Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rows counts a table's rows, the rate_limit table included.
func rows(t *testing.T, e env, table string) int {
	t.Helper()
	return rawInt(t, e, `SELECT count(*) FROM "`+table+`"`)
}

// testSweepExpired: one run deletes every row worthless at its instant,
// whatever the kind, in as many batches as it takes, and nothing else: a
// session expiring at the instant itself goes (it is refused already), one
// a millisecond later stays. The metrics and the log line say what went.
func testSweepExpired(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	now := t0.Add(48 * time.Hour)
	const revTTL = 30 * 24 * time.Hour
	// Sessions: 7 expired (one exactly now), 2 live (one a millisecond
	// from now).
	mustCreateUser(t, db, "u1", "ann@example.com", t0, now.Add(time.Millisecond))
	for i, exp := range []time.Time{t0, t0.Add(time.Hour), now.Add(-time.Hour), now.Add(-time.Millisecond), now, t0, t0, now.Add(time.Hour)} {
		s := issuer.Session{ID: "s" + string(rune('a'+i)), Token: "tok" + string(rune('a'+i)), UserID: "u1",
			ExpiresAt: exp, CreatedAt: t0, UpdatedAt: t0, Remember: true}
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// Recovery tokens: a reset link expired, a verification link live,
	// one of each kind per user (a new link replaces the user's older).
	mustCreateUser(t, db, "u2", "bob@example.com", t0, now.Add(time.Hour))
	expiredReset := issueToken(t, db, mail.PasswordReset, "u1", "ann@example.com", t0, time.Hour)
	liveVerify := issueToken(t, db, mail.EmailVerification, "u1", "ann@example.com", now.Add(-time.Hour), 24*time.Hour)
	expiredVerify := issueToken(t, db, mail.EmailVerification, "u2", "bob@example.com", t0, 24*time.Hour)
	// Sign-in flows: ten minutes each.
	for i, at := range []time.Time{t0, now.Add(-10 * time.Minute), now.Add(-5 * time.Minute)} {
		if err := db.SaveOAuthState(ctx, oauthState("flow"+string(rune('a'+i)), at)); err != nil {
			t.Fatal(err)
		}
	}
	// Rate-limit buckets: untouched for a day and more, and fresh.
	r := issuer.Rate{N: 5, Per: time.Minute}
	for key, at := range map[string]time.Time{"old": t0, "older": t0.Add(-time.Hour), "fresh": now.Add(-time.Hour)} {
		if _, err := db.TakeToken(ctx, key, r, at); err != nil {
			t.Fatal(err)
		}
	}
	// Revocations: older than the TTL, and within it.
	for _, at := range []time.Time{now.Add(-revTTL - time.Second), now.Add(-revTTL - time.Hour), now.Add(-revTTL + time.Second)} {
		if err := db.RevokeAll(ctx, at); err != nil {
			t.Fatal(err)
		}
	}

	reg := prometheus.NewRegistry()
	var log bytes.Buffer
	res, err := sweeper(t, db, now, 3, revTTL, reg, &log).Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[sqlstore.SweepKind]int64{
		sqlstore.SweepSessions: 7, sqlstore.SweepRecoveryTokens: 2, sqlstore.SweepOAuthStates: 2,
		sqlstore.SweepRateLimits: 2, sqlstore.SweepRevocations: 2,
	}
	for _, k := range sqlstore.SweepKinds() {
		if res.Removed[k] != want[k] || res.Pending[k] != 0 {
			t.Errorf("%s: got %d removed, %d pending, want %d removed, 0 pending", k, res.Removed[k], res.Pending[k], want[k])
		}
	}
	if res.Skipped {
		t.Error("the only sweeper skipped its run")
	}
	wantCounts(t, db, map[string]int{"session": 3, "recovery_token": 1, "oauth_state": 1, "revocation": 1})
	if n := rows(t, e, "rate_limit"); n != 1 {
		t.Errorf("rate_limit: got %d rows, want 1 (the fresh bucket)", n)
	}
	if got := sessionIDs(t, db); strings.Join(got, ",") != "s-u1,s-u2,sh" {
		t.Errorf("sessions left: got %v, want the live ones s-u1, s-u2, sh", got)
	}
	for _, tok := range []struct {
		is   issued
		want int
	}{{expiredReset, 0}, {liveVerify, 1}, {expiredVerify, 0}} {
		if n := rawInt(t, e, `SELECT count(*) FROM recovery_token WHERE user_id = ? AND kind = ?`, tok.is.tok.UserID, string(tok.is.tok.Kind)); n != tok.want {
			t.Errorf("%s token of %s, expiring at %v: got %d rows, want %d", tok.is.tok.Kind, tok.is.tok.UserID, tok.is.tok.ExpiresAt, n, tok.want)
		}
	}

	for _, m := range []struct {
		name, label, value string
		want               float64
	}{
		{"authsidecar_sweep_removed_total", "kind", "session", 7},
		{"authsidecar_sweep_removed_total", "kind", "revocation", 2},
		{"authsidecar_sweep_pending_rows", "kind", "session", 0},
		{"authsidecar_sweep_runs_total", "result", "swept", 1},
		{"authsidecar_sweep_runs_total", "result", "failed", 0},
	} {
		if got := metricValue(t, reg, m.name, m.label, m.value); got != m.want {
			t.Errorf("%s{%s=%q}: got %v, want %v", m.name, m.label, m.value, got, m.want)
		}
	}
	line := log.String()
	for _, w := range []string{`"msg":"expired rows swept"`, `"removed":{"session":7,"recovery_token":2,"oauth_state":2,"rate_limit":2,"revocation":2}`} {
		if !strings.Contains(line, w) {
			t.Errorf("log: got %s, want it to hold %s", line, w)
		}
	}

	// A second run finds nothing, and says nothing.
	log.Reset()
	res, err = sweeper(t, db, now, 3, revTTL, nil, &log).Sweep(ctx)
	if err != nil || len(res.Removed) != 0 {
		t.Errorf("second run: got %v %v, want nothing removed", res.Removed, err)
	}
	if log.Len() != 0 {
		t.Errorf("second run logged %s, want nothing", log.String())
	}
}

// metricValue reads the sample of a counter or gauge with label=value.
func metricValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q} series", name, label, value)
	return 0
}

// testSweepOneReplicaAtATime: on PostgreSQL a replica whose sweeper finds
// another holding the sweep lock skips its run, deletes nothing and
// reports no backlog of its own; once the lock is free it sweeps. On
// SQLite, which one process owns, there is no lock to find taken.
func testSweepOneReplicaAtATime(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	mustCreateUser(t, db, "u1", "ann@example.com", t0, t0.Add(time.Hour))
	now := t0.Add(2 * time.Hour)
	other := e.replica(t)
	unlock, ok, err := other.HoldSweepLockForTest(ctx)
	if err != nil || !ok {
		t.Fatalf("the first lock: got %v %v, want it taken", ok, err)
	}
	reg := prometheus.NewRegistry()
	s := sweeper(t, db, now, 0, 0, reg, nil)
	res, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	shared := e.self.name == "postgres"
	if res.Skipped != shared {
		t.Errorf("%s, lock held by another replica: got skipped %v, want %v", e.self.name, res.Skipped, shared)
	}
	wantLeft := map[bool]int{true: 1, false: 0}[shared]
	wantCounts(t, db, map[string]int{"session": wantLeft})
	if shared {
		if got := metricValue(t, reg, "authsidecar_sweep_runs_total", "result", "skipped"); got != 1 {
			t.Errorf("runs_total{result=skipped}: got %v, want 1", got)
		}
		if got := metricValue(t, reg, "authsidecar_sweep_pending_rows", "kind", "session"); got != 0 {
			t.Errorf("pending_rows{kind=session} of a skipped run: got %v, want 0 (the other replica reports it)", got)
		}
	}
	unlock()
	if res, err := s.Sweep(ctx); err != nil || res.Skipped || res.Removed[sqlstore.SweepSessions] != int64(wantLeft) {
		t.Errorf("after the lock is released: got %+v %v, want %d session removed", res, err, wantLeft)
	}
	wantCounts(t, db, map[string]int{"session": 0})
	// The sweeper let the lock go: another replica takes it.
	unlock, ok, err = other.HoldSweepLockForTest(ctx)
	if err != nil || !ok {
		t.Fatalf("after a run: got %v %v, want the lock free", ok, err)
	}
	unlock()
}

// testSweepRevocationsKeepCursors: sweeping revocations, the newest one
// included, leaves every poller's cursor right: ids are never handed out
// again, so a cursor past the swept rows still reads each later one once,
// and a cursor before them reads the rows left, without error.
func testSweepRevocationsKeepCursors(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	for i := range 3 {
		if err := db.RevokeAll(ctx, t0.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	_, cursor := revokedSince(t, db, 0)
	if cursor != 3 {
		t.Fatalf("cursor after three revocations: got %d, want 3", cursor)
	}
	// Every one of them older than the TTL: the table is emptied.
	res, err := sweeper(t, db, t0.Add(time.Hour), 2, 30*time.Minute, nil, nil).Sweep(ctx)
	if err != nil || res.Removed[sqlstore.SweepRevocations] != 3 {
		t.Fatalf("sweep: got %v %v, want 3 revocations removed", res.Removed, err)
	}
	if err := db.RevokeAll(ctx, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, next := revokedSince(t, db, cursor)
	if len(got) != 1 || next <= cursor {
		t.Errorf("from cursor %d after the sweep: got %v up to id %d, want the new revocation past it", cursor, got, next)
	}
	if got, _ := revokedSince(t, db, 1); len(got) != 1 {
		t.Errorf("from cursor 1, before the swept rows: got %v, want the one row left", got)
	}
}
