package sqlstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/authsidecar/authsidecar/sqlstore"
)

// TestSQLitePathsWithURICharacters: the database is the file named, even
// when its name holds what a "file:" URI reads otherwise ("?" starts the
// query, "#" the fragment, "%41" is "A"); the inspection that "check" does
// reads that same file; nothing else is created beside it.
func TestSQLitePathsWithURICharacters(t *testing.T) {
	for _, name := range []string{"a?b.db", "a#b.db", "a%41b.db", "a%b.db", "a?mode=ro&x=%23.db", "plain.db"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, name)
			db, err := sqlstore.OpenSQLite(context.Background(), path)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if _, err := db.Count(context.Background(), "user"); err != nil {
				t.Fatal(err)
			}
			db.Close()
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Name() != name && e.Name() != name+"-wal" && e.Name() != name+"-shm" {
					t.Errorf("opening %q created %q beside it", name, e.Name())
				}
			}
			hdr := make([]byte, 16)
			if f, err := os.Open(path); err != nil {
				t.Fatal(err)
			} else {
				f.Read(hdr)
				f.Close()
			}
			if string(hdr) != "SQLite format 3\x00" {
				t.Errorf("%q is not the database: header %q", name, hdr)
			}
			in, err := sqlstore.InspectSQLite(context.Background(), path)
			if err != nil || !in.Exists || in.Version != in.Known {
				t.Errorf("inspect: got %+v %v, want the migrated database", in, err)
			}
		})
	}
}
