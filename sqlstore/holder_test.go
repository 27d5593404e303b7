//go:build unix

package sqlstore_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/authsidecar/authsidecar/sqlstore"
)

// TestSQLiteHolder: a SQLite file another process has open (a sidecar
// serving from it) is reported with that process's id, idle as it is;
// once it closes, nobody holds it.
func TestSQLiteHolder(t *testing.T) {
	if path := os.Getenv("SQLSTORE_TEST_HOLD"); path != "" {
		// The other process: open the database, say so, and hold it
		// until stdin closes.
		db, err := sqlstore.OpenSQLite(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("open\n")
		bufio.NewReader(os.Stdin).ReadString('\n')
		db.Close()
		return
	}
	path := filepath.Join(t.TempDir(), "auth.db")
	if held, _, err := sqlstore.SQLiteHolder(path); held || err != nil {
		t.Fatalf("a missing file: got held %t, %v; want nobody", held, err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteHolder$")
	cmd.Env = append(os.Environ(), "SQLSTORE_TEST_HOLD="+path)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "open\n" {
		t.Fatalf("the other process: got %q %v", line, err)
	}
	held, pid, err := sqlstore.SQLiteHolder(path)
	if !held || pid != cmd.Process.Pid || err != nil {
		t.Errorf("open in process %d: got held %t by %d, %v", cmd.Process.Pid, held, pid, err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if held, _, err := sqlstore.SQLiteHolder(path); held || err != nil {
		t.Errorf("after it closed: got held %t, %v; want nobody", held, err)
	}
}
