// Package pgtest gives tests a real PostgreSQL: a throwaway cluster of
// their own, started from Debian's binaries (initdb and postgres under
// /usr/lib/postgresql/*/bin) in a temporary directory on a free loopback
// port, or the server named by AUTHSIDECAR_TEST_DATABASE_URL. Without
// either, tests skip with a message, and fail under CI=true, where a
// missing PostgreSQL means a broken CI setup rather than a choice.
//
// Clusters use password authentication (scram-sha-256) with a random
// password, so tests can check that the password never leaks, and run
// with fsync off: the data is thrown away.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/authsidecar/authsidecar/internal/pgcluster"
)

// EnvURL names the variable holding the URL of an existing server to use
// instead of a throwaway cluster. Tests create and drop databases in it.
const EnvURL = "AUTHSIDECAR_TEST_DATABASE_URL"

var (
	sharedOnce sync.Once
	shared     *pgcluster.Cluster
	sharedErr  error
)

// Main runs the tests and then stops the shared cluster, if one was
// started, and removes its files. Call it from TestMain.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main without the exit, for a TestMain with more to clean up.
func Run(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	return code
}

// URL returns the URL of a fresh, empty database for this test, dropped
// when the test ends. The server behind it is shared by the test binary.
func URL(tb testing.TB) string {
	tb.Helper()
	admin := os.Getenv(EnvURL)
	if admin == "" {
		sharedOnce.Do(func() { shared, sharedErr = pgcluster.New() })
		if sharedErr != nil {
			unavailable(tb, sharedErr)
		}
		admin = shared.AdminURL()
	}
	return freshDatabase(tb, admin)
}

// Start starts a cluster for this test alone (for tests that stop and
// restart the server), removed when the test ends.
func Start(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := pgcluster.New()
	if err != nil {
		unavailable(tb, err)
	}
	tb.Cleanup(c.Close)
	return &Cluster{Cluster: c, url: freshDatabase(tb, c.AdminURL())}
}

// Cluster is a test's own server: Stop and Start it under the code being
// tested.
type Cluster struct {
	*pgcluster.Cluster
	url string
}

// URL returns the URL of the database Start created for the test.
func (c *Cluster) URL() string { return c.url }

func unavailable(tb testing.TB, err error) {
	tb.Helper()
	msg := fmt.Sprintf("PostgreSQL is needed: %v (install Debian's postgresql package, or set %s)", err, EnvURL)
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// freshDatabase creates an empty database on the server at admin and
// returns its URL; it is dropped when the test ends.
func freshDatabase(tb testing.TB, admin string) string {
	tb.Helper()
	u, err := url.Parse(admin)
	if err != nil {
		tb.Fatalf("pgtest: %s is not a URL", EnvURL)
	}
	suffix := make([]byte, 6)
	rand.Read(suffix)
	name := "t_" + hex.EncodeToString(suffix)
	db, err := sql.Open("pgx", admin)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE DATABASE ` + name); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	tb.Cleanup(func() {
		db, err := sql.Open("pgx", admin)
		if err != nil {
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		db.ExecContext(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
	})
	u.Path = "/" + name
	return u.String()
}
