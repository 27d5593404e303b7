package sqlstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/pgtest"
	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/mail"
	"github.com/authsidecar/authsidecar/sqlstore"
)

// BenchmarkOutbox: the store's share of a reset request (issue: token
// and message in one transaction) and of one delivery (claim and ack),
// on each engine, beside TakeToken, the one-row transaction every
// sign-in already pays, as the baseline of the same run.
func BenchmarkOutbox(b *testing.B) {
	ctx := context.Background()
	opens := []struct {
		name string
		open func(b *testing.B) (*sqlstore.DB, error)
	}{
		{"sqlite", func(b *testing.B) (*sqlstore.DB, error) {
			return sqlstore.OpenSQLite(ctx, filepath.Join(b.TempDir(), "b.db"))
		}},
		{"postgres", func(b *testing.B) (*sqlstore.DB, error) {
			return sqlstore.OpenPostgres(ctx, sqlstore.PostgresOptions{URL: pgtest.URL(b)})
		}},
	}
	for _, o := range opens {
		b.Run(o.name, func(b *testing.B) {
			db, err := o.open(b)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			u, s := newUser("u1", "ann@example.com", t0)
			if err := db.CreateUser(ctx, u, "h", s); err != nil {
				b.Fatal(err)
			}
			sealed := make([]byte, 400) // about a sealed message's size
			n := 0
			issue := func() {
				n++
				var h [32]byte
				copy(h[:], fmt.Sprintf("%032d", n))
				if err := db.IssueRecoveryToken(ctx,
					issuer.RecoveryToken{Hash: h, Kind: mail.PasswordReset, UserID: "u1", Email: u.Email, ExpiresAt: t0.Add(time.Hour), CreatedAt: t0},
					mail.Queued{ID: fmt.Sprint("msg_", n), Kind: mail.PasswordReset, Sealed: sealed, CreatedAt: t0}); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("take_token", func(b *testing.B) {
				for range b.N {
					if _, err := db.TakeToken(ctx, "k", issuer.Rate{N: 1 << 30, Per: time.Second}, t0); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("issue", func(b *testing.B) {
				for range b.N {
					issue()
				}
			})
			b.Run("claim_ack", func(b *testing.B) {
				for range b.N {
					issue()
				}
				b.ResetTimer()
				for range b.N {
					got, err := db.ClaimOutbox(ctx, "w", 1, time.Minute, t0.Add(time.Hour))
					if err != nil || len(got) != 1 {
						b.Fatalf("claim: got %d rows, %v", len(got), err)
					}
					if err := db.AckOutbox(ctx, got[0].ID, "w", t0.Add(time.Hour)); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
