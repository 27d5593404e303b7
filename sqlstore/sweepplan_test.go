package sqlstore_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/authsidecar/authsidecar/sqlstore"
)

// TestSQLiteSweepUsesIndexes: every statement of a sweep reads its table
// through an index, never by a scan: a batch and a count read the expired
// rows only, so a run on a table of live sessions holds SQLite's writer
// for the rows it deletes, not for the table. (PostgreSQL's planner picks
// by statistics; its index is the same, from the same migration.)
func TestSQLiteSweepUsesIndexes(t *testing.T) {
	db, path := MustOpenDB(t)
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, k := range sqlstore.SweepKinds() {
		for _, q := range db.SweepQueriesForTest(k) {
			rows, err := raw.Query(`EXPLAIN QUERY PLAN `+q, 0, 1000)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			rows.Close()
			for _, step := range plan {
				if strings.HasPrefix(step, "SCAN ") {
					t.Errorf("%s: %q scans the table, want every step an index search (plan %q)", k, q, plan)
				}
			}
		}
	}
}
