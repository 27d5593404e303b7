package sqlstore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/pgtest"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// TestMain stops the shared throwaway PostgreSQL cluster (if a test started
// one) after the run.
func TestMain(m *testing.M) { pgtest.Main(m) }

// The conformance suite: every case runs unchanged on each engine, on a
// database of its own, as river's riverdrivertest does for its drivers.
// A behaviour that differs between the engines is a bug in the provider,
// unless the case says why the difference is intended (LockKeys).
//
// Run one case on both engines with -run 'TestConformance/.*/TakeToken'.

// conformanceCases lists the cases; they live beside what they test in the
// conformance_*_test.go files.
var conformanceCases = []struct {
	name string
	run  func(t *testing.T, db *sqlstore.DB, e env)
}{
	{"OpenReopenKeepsData", testOpenReopenKeepsData},
	{"OpenConcurrentlyOnEmpty", testOpenConcurrentlyOnEmpty},
	{"InspectChangesNothing", testInspectChangesNothing},
	{"PingAndCount", testPingAndCount},
	{"Observe", testObserve},

	{"CreateUser", testCreateUser},
	{"CreateUserAtomic", testCreateUserAtomic},
	{"CreateUserConcurrentReplicas", testCreateUserConcurrentReplicas},
	{"CreateMigratedUser", testCreateMigratedUser},
	{"CreateMigratedUserConcurrent", testCreateMigratedUserConcurrent},
	{"UserFieldsRoundTrip", testUserFieldsRoundTrip},
	{"Passwords", testPasswords},
	{"CreateSessionRehashed", testCreateSessionRehashed},
	{"PasswordFormats", testPasswordFormats},

	{"Sessions", testSessions},
	{"EndSessions", testEndSessions},

	{"Keys", testKeys},
	{"KeysNullColumns", testKeysNullColumns},
	{"LockKeys", testLockKeys},

	{"HasAnyRole", testHasAnyRole},
	{"UsersAndDelete", testUsersAndDelete},
	{"RoleGrants", testRoleGrants},

	{"TakeToken", testTakeToken},
	{"TakeTokenConcurrentReplicas", testTakeTokenConcurrentReplicas},
	{"TakeTokenSweepsOldBuckets", testTakeTokenSweepsOldBuckets},

	{"ProofUnlinks", testProofUnlinks},
	{"UnclaimedEmail", testUnclaimedEmail},
	{"MigrateUnclaimed", testMigrateUnclaimed},

	{"IssueRecoveryToken", testIssueRecoveryToken},
	{"IssueRecoveryTokenConcurrent", testIssueRecoveryTokenConcurrent},
	{"RecoveryTokenExpiry", testRecoveryTokenExpiry},
	{"ResetPassword", testResetPassword},
	{"ResetPasswordCrossKind", testResetPasswordCrossKind},
	{"ResetPasswordCreatesCredential", testResetPasswordCreatesCredential},
	{"VerifyEmail", testVerifyEmail},
	{"VerifyEmailSignsIn", testVerifyEmailSignsIn},
	{"RecoveryTokenSingleUse", testRecoveryTokenSingleUse},
	{"RecoveryConcurrentMix", testRecoveryConcurrentMix},
	{"DeleteUserCascadesTokens", testDeleteUserCascadesTokens},
	{"RecoveryTokenSweep", testRecoveryTokenSweep},

	{"OutboxClaimAckFail", testOutboxClaimAckFail},
	{"OutboxLease", testOutboxLease},
	{"OutboxClaimExactlyOnce", testOutboxClaimExactlyOnce},
	{"OldestPending", testOldestPending},
	{"ListOutbox", testListOutbox},
	{"RetryOutbox", testRetryOutbox},
	{"ReleaseOutbox", testReleaseOutbox},
	{"OutboxClaimCountsAttempt", testOutboxClaimCountsAttempt},
	{"OutboxRenew", testOutboxRenew},
	{"OutboxSweep", testOutboxSweep},

	{"RevocationsWithTheirCause", testRevocationsWithTheirCause},
	{"Bans", testBans},
	{"RevocationsSinceAndSweep", testRevocationsSinceAndSweep},
	{"RevocationsConcurrentWriters", testRevocationsConcurrentWriters},

	{"SweepExpired", testSweepExpired},
	{"SweepOneReplicaAtATime", testSweepOneReplicaAtATime},
	{"SweepRevocationsKeepCursors", testSweepRevocationsKeepCursors},
	{"MigrateSweepOnExisting", testMigrateSweepOnExisting},
	{"SweptRevocationStillRefused", testSweptRevocationStillRefused},

	{"OAuthStateSingleUse", testOAuthStateSingleUse},
	{"OAuthStateSweep", testOAuthStateSweep},
	{"SocialUser", testSocialUser},
	{"LinkAccount", testLinkAccount},
	{"UpdateAccount", testUpdateAccount},
	{"DeleteAccountKeepsLast", testDeleteAccountKeepsLast},
	{"DeleteAccountConcurrent", testDeleteAccountConcurrent},

	{"ExportImportRoundTrip", testExportImportRoundTrip},
	{"ImportRefusesNonEmpty", testImportRefusesNonEmpty},
	{"ImportIsAllOrNothing", testImportIsAllOrNothing},

	{"ImportUsersConflicts", testImportUsersConflicts},
	{"ImportUsersDryRun", testImportUsersDryRun},
	{"ImportUsersRaced", testImportUsersRaced},
	{"ImportUsersWhileServing", testImportUsersWhileServing},
	{"ImportUsersAtScale", testImportUsersAtScale},
}

func TestConformance(t *testing.T) {
	for i, eng := range engines {
		other := engines[len(engines)-1-i]
		t.Run(eng.name, func(t *testing.T) {
			for _, c := range conformanceCases {
				t.Run(c.name, func(t *testing.T) {
					d := eng.fresh(t)
					c.run(t, d.mustOpen(t), env{self: eng, other: other, db: d})
				})
			}
		})
	}
}

// engine makes fresh databases of one kind.
type engine struct {
	name string
	// fresh returns a new, empty database that nothing has opened yet.
	// PostgreSQL's skips the test when no server is available (and fails
	// it under CI=true: see pgtest).
	fresh func(t *testing.T) database
}

var engines = []engine{
	{"sqlite", func(t *testing.T) database {
		path := filepath.Join(t.TempDir(), "test.db")
		return database{
			open:    func(ctx context.Context) (*sqlstore.DB, error) { return sqlstore.OpenSQLite(ctx, path) },
			inspect: func(ctx context.Context) (sqlstore.Inspection, error) { return sqlstore.InspectSQLite(ctx, path) },
			// The raw handle waits for the store's writers instead of
			// failing with SQLITE_BUSY, and checks foreign keys like it.
			rawDriver: "sqlite", rawDSN: "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)",
		}
	}},
	{"postgres", func(t *testing.T) database {
		url := pgtest.URL(t)
		return database{
			open: func(ctx context.Context) (*sqlstore.DB, error) {
				return sqlstore.OpenPostgres(ctx, sqlstore.PostgresOptions{URL: url})
			},
			inspect: func(ctx context.Context) (sqlstore.Inspection, error) {
				return sqlstore.InspectPostgres(ctx, sqlstore.PostgresOptions{URL: url})
			},
			rawDriver: "pgx", rawDSN: url,
		}
	}},
}

// database is one database of an engine.
type database struct {
	// open opens one more handle on the database, migrating it if needed:
	// two handles are two replicas sharing it.
	open func(ctx context.Context) (*sqlstore.DB, error)
	// inspect reads it read-only, as "check" does.
	inspect func(ctx context.Context) (sqlstore.Inspection, error)
	// rawDriver and rawDSN open a plain database/sql handle on it, for
	// what the store's API cannot do: plant a NULL, read the schema
	// version.
	rawDriver, rawDSN string
}

// mustOpen opens a handle that is closed when the test ends.
func (d database) mustOpen(t *testing.T) *sqlstore.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := d.open(ctx)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// raw opens a plain database/sql handle, closed when the test ends.
// Queries through it are written for d's engine.
func (d database) raw(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open(d.rawDriver, d.rawDSN)
	if err != nil {
		t.Fatalf("raw open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// env is what a case gets besides its open database.
type env struct {
	self, other engine
	db          database // the database the case's *sqlstore.DB is open on
}

// replica opens a second handle on the case's database: another replica.
func (e env) replica(t *testing.T) *sqlstore.DB { return e.db.mustOpen(t) }

// freshOther opens a new, empty database of the other engine.
func (e env) freshOther(t *testing.T) *sqlstore.DB { return e.other.fresh(t).mustOpen(t) }

// freshSelf opens a new, empty database of the case's own engine.
func (e env) freshSelf(t *testing.T) *sqlstore.DB { return e.self.fresh(t).mustOpen(t) }

// t0 is the suite's clock: instants are passed in, never read.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// wantCounts checks the number of rows in each table.
func wantCounts(t *testing.T, db *sqlstore.DB, want map[string]int) {
	t.Helper()
	for _, table := range []string{"user", "account", "session", "jwks", "user_role", "recovery_token", "outbox", "revocation", "oauth_state"} {
		w, ok := want[table]
		if !ok {
			continue
		}
		n, err := db.Count(context.Background(), table)
		if err != nil {
			t.Errorf("count %s: %v", table, err)
			continue
		}
		if n != w {
			t.Errorf("%s: got %d rows, want %d", table, n, w)
		}
	}
}

// empty is wantCounts' map for an empty database.
func empty() map[string]int {
	return map[string]int{"user": 0, "account": 0, "session": 0, "jwks": 0, "user_role": 0, "recovery_token": 0, "outbox": 0, "revocation": 0, "oauth_state": 0}
}

func ptr[T any](v T) *T { return &v }
