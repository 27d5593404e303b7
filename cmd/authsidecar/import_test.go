package main

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/authsidecar/authsidecar/internal/importgen"
	"github.com/authsidecar/authsidecar/internal/pgtest"
)

// TestUsersImportEndToEnd: a user of every password hash format (passhash's
// vectors, made by the libraries of the systems that use them), imported by
// the built binary from JSON Lines into SQLite with the sidecar stopped, and
// from CSV on stdin into PostgreSQL while it serves, signs in over HTTP with
// its password: the JWT's sub and the X-User-Id the upstream receives are
// the id the file gave, and the imported role opens the admin route.
func TestUsersImportEndToEnd(t *testing.T) {
	all, err := importgen.LoadVectors(filepath.Join("..", "..", "passhash", "testdata"), nil)
	if err != nil {
		t.Fatal(err)
	}
	type user struct{ id, email, password, format string }
	var users []user
	seen := map[string]bool{}
	for _, v := range all {
		if seen[v.Format] || v.Password == "" {
			continue
		}
		seen[v.Format] = true
		i := len(users)
		id := []string{strconv.Itoa(1000 + i), fmt.Sprintf("5f0c6e1a-0b7d-4c2e-9a43-%012d", i), "crm:" + strconv.Itoa(i)}[i%3]
		users = append(users, user{id, v.Format + "@example.com", v.Password, v.Hash})
	}
	var jsonl, csvText bytes.Buffer
	cw := csv.NewWriter(&csvText)
	cw.Write([]string{"id", "email", "password_hash", "roles", "email_verified"})
	for i, u := range users {
		line := map[string]any{"id": u.id, "email": u.email, "password_hash": u.format, "email_verified": true}
		roles := ""
		if i == 0 {
			line["roles"], roles = []string{"admin"}, "admin"
		}
		json.NewEncoder(&jsonl).Encode(line)
		cw.Write([]string{u.id, u.email, u.format, roles, "true"})
	}
	cw.Flush()
	dir := t.TempDir()
	jsonlPath := filepath.Join(dir, "users.jsonl")
	writeFile(t, jsonlPath, jsonl.String())

	signIn := func(t *testing.T, s *instance) {
		t.Helper()
		for i, u := range users {
			res, body := s.do(t, "POST", "/api/auth/sign-in/email", fmt.Sprintf(`{"email":%q,"password":%q}`, u.email, u.password))
			if res.StatusCode != 200 || len(res.Cookies()) == 0 {
				t.Errorf("sign-in of %s (%s): got %d %s", u.email, u.id, res.StatusCode, body)
				continue
			}
			jwt := getJWT(t, s, res.Cookies()[0].Name+"="+res.Cookies()[0].Value)
			payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(jwt, ".")[1])
			var claims struct{ Sub string }
			json.Unmarshal(payload, &claims)
			if claims.Sub != u.id {
				t.Errorf("%s: JWT sub %q, want the imported id %q", u.email, claims.Sub, u.id)
			}
			res, body = s.do(t, "GET", "/api/tasks", "", "Authorization", "Bearer "+jwt)
			var echo struct{ User string }
			if json.Unmarshal(body, &echo); res.StatusCode != 200 || echo.User != u.id {
				t.Errorf("%s: upstream got X-User-Id %q (%d), want %q", u.email, echo.User, res.StatusCode, u.id)
			}
			if want := map[bool]int{true: 200, false: 403}[i == 0]; status(t, s, "/api/admin/x", jwt) != want {
				t.Errorf("%s: admin route: want %d", u.email, want)
			}
		}
	}
	// importCLI runs the binary and returns its output and exit error.
	importCLI := func(stdin string, env []string, args ...string) (string, error) {
		cmd := exec.Command(sidecarBinary(t), args...)
		cmd.Env = append(testEnv(), env...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	up := echoUpstream(t)
	limits := "limits: { signin_per_ip: \"off\", signin_per_email: \"off\" }\n"

	t.Run("SQLite, the sidecar stopped", func(t *testing.T) {
		cfg, port := writeConfigFile(t, dir, "sqlite.yaml", fmt.Sprintf("base_url: \"http://app.example.test\"\nupstream: %q\ndatabase: { driver: sqlite, path: %q }\n%s",
			up.URL, filepath.Join(dir, "auth.db"), limits))
		p := startBinary(t, cfg, port, "AUTH_SECRET="+e2eSecret)
		out, err := importCLI("", nil, "users", "import", "-config", cfg, "-allow-weak-hashes", jsonlPath)
		if err == nil || !strings.Contains(out, "is open in process") || !strings.Contains(out, "stop it before importing into SQLite") {
			t.Errorf("import while the sidecar serves from SQLite: got %v %q, want a refusal", err, out)
		}
		out, err = importCLI("", nil, "users", "import", "-config", cfg, "-allow-weak-hashes", "-dry-run", jsonlPath)
		if want := fmt.Sprintf("would import %d users", len(users)); err != nil || !strings.Contains(out, want) {
			t.Errorf("dry run beside the sidecar: got %v %q, want %q", err, out, want)
		}
		if err := p.stop(); err != nil {
			t.Fatal(err)
		}
		out, err = importCLI("", nil, "users", "import", "-config", cfg, "-allow-weak-hashes", jsonlPath)
		if want := fmt.Sprintf("imported %d users", len(users)); err != nil || !strings.Contains(out, want) {
			t.Fatalf("import: got %v %q, want %q", err, out, want)
		}
		signIn(t, startBinary(t, cfg, port, "AUTH_SECRET="+e2eSecret).instance)
	})

	t.Run("PostgreSQL, from stdin, while serving", func(t *testing.T) {
		url := pgtest.URL(t)
		cfg, port := replicaConfig(t, dir, "postgres.yaml", up.URL, "")
		s := startBinary(t, cfg, port, pgEnv(url)...).instance
		out, err := importCLI(csvText.String(), pgEnv(url), "users", "import", "-config", cfg, "-format", "csv", "-allow-weak-hashes", "-")
		if want := fmt.Sprintf("imported %d users", len(users)); err != nil || !strings.Contains(out, want) {
			t.Fatalf("import: got %v %q, want %q", err, out, want)
		}
		signIn(t, s)
		// Again: every line exists; fail refuses each with its number,
		// skip skips them all.
		out, err = importCLI(csvText.String(), pgEnv(url), "users", "import", "-config", cfg, "-format", "csv", "-allow-weak-hashes", "-")
		if err == nil || !strings.Contains(out, "line 2: user "+users[0].id+" exists already with this email") {
			t.Errorf("second import: got %v %q, want each line refused", err, out)
		}
		out, err = importCLI(csvText.String(), pgEnv(url), "users", "import", "-config", cfg, "-format", "csv", "-allow-weak-hashes", "-on-conflict", "skip", "-")
		if want := fmt.Sprintf("imported 0 users, updated 0, skipped %d, refused 0", len(users)); err != nil || !strings.Contains(out, want) {
			t.Errorf("import with skip: got %v %q, want %q", err, out, want)
		}
	})
}
