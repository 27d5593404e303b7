package sqlstore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/mail"
)

// BenchmarkSecureDelete: the outbox's life (issue, claim, ack) and a
// session's (create, delete) with SQLite's secure_delete off and "fast",
// as OpenSQLite sets it, in the same run. synchronous=OFF in both: fast
// promises no more I/O, so what is compared is the CPU it adds, which
// fsync noise would otherwise hide.
func BenchmarkSecureDelete(b *testing.B) {
	for _, mode := range []string{"0", "fast"} {
		b.Run("secure_delete="+mode, func(b *testing.B) {
			ctx := context.Background()
			db, err := OpenSQLite(ctx, filepath.Join(b.TempDir(), "b.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if _, err := db.w.ExecContext(ctx, "PRAGMA synchronous=OFF"); err != nil {
				b.Fatal(err)
			}
			if _, err := db.w.ExecContext(ctx, "PRAGMA secure_delete="+mode); err != nil {
				b.Fatal(err)
			}
			t0 := time.Unix(1700000000, 0)
			u := issuer.User{ID: "u1", Name: "n", Email: "a@example.com", CreatedAt: t0, UpdatedAt: t0}
			if err := db.CreateUser(ctx, u, "h", issuer.Session{ID: "s0", Token: "t0", UserID: "u1", ExpiresAt: t0, CreatedAt: t0, UpdatedAt: t0}); err != nil {
				b.Fatal(err)
			}
			sealed := make([]byte, 400)
			b.ResetTimer()
			for i := range b.N {
				var h [32]byte
				copy(h[:], fmt.Sprintf("%032d", i))
				id := fmt.Sprint("msg_", i)
				if err := db.IssueRecoveryToken(ctx, issuer.RecoveryToken{Hash: h, Kind: mail.PasswordReset, UserID: "u1", Email: "a@example.com", ExpiresAt: t0.Add(time.Hour), CreatedAt: t0},
					mail.Queued{ID: id, Kind: mail.PasswordReset, Sealed: sealed, CreatedAt: t0}); err != nil {
					b.Fatal(err)
				}
				if _, err := db.ClaimOutbox(ctx, "w", 1, time.Minute, t0); err != nil {
					b.Fatal(err)
				}
				if err := db.AckOutbox(ctx, id, "w", t0); err != nil {
					b.Fatal(err)
				}
				s := issuer.Session{ID: fmt.Sprint("s", i+1), Token: fmt.Sprint("t", i+1), UserID: "u1", ExpiresAt: t0, CreatedAt: t0, UpdatedAt: t0}
				if err := db.CreateSession(ctx, s); err != nil {
					b.Fatal(err)
				}
				if err := db.DeleteSession(ctx, s.Token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
