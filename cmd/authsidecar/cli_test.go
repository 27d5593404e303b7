package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authsidecar/authsidecar/sqlstore"
)

func TestCLIGrammar(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr error
		wantOut string
	}{
		{"no command", nil, errUsage, ""},
		{"unknown command", []string{"frobnicate"}, errUsage, ""},
		{"version", []string{"version"}, nil, "authsidecar "},
		{"flag after positional", []string{"version", "extra", "-config", "x.yaml"}, errUsage, ""},
		{"positional to serve", []string{"serve", "now"}, errUsage, ""},
		{"unknown flag", []string{"check", "-nope"}, errUsage, ""},
		{"help", []string{"check", "-h"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tt.args, func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
			if !errors.Is(err, tt.wantErr) && !(tt.wantErr == nil && err == nil) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("got stdout %q, want it to contain %q", out.String(), tt.wantOut)
			}
		})
	}
	var errOut bytes.Buffer
	run(context.Background(), []string{"serve", "-h"}, func(string) string { return "" }, strings.NewReader(""), &bytes.Buffer{}, &errOut)
	if !strings.Contains(errOut.String(), "AUTH_SECRET") {
		t.Errorf("serve -h does not say it needs the secret: %s", errOut.String())
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	cfgPath, port := writeConfig(t, dir, "")
	check := func(secret string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), []string{"check", "-config", cfgPath}, func(k string) string {
			if k == "AUTH_SECRET" {
				return secret
			}
			return ""
		}, strings.NewReader(""), &out, &bytes.Buffer{})
		return out.String(), err
	}

	if out, err := check(e2eSecret); err != nil || !strings.Contains(out, "all checks passed") {
		t.Fatalf("fresh database: got %v\n%s", err, out)
	}
	if _, err := check(""); err == nil || !strings.Contains(err.Error(), "AUTH_SECRET is not set") {
		t.Errorf("missing secret: got %v", err)
	}
	if _, err := check("short"); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Errorf("short secret: got %v", err)
	}

	// Create a key with one secret, then check with another.
	s := startSidecar(t, cfgPath, port, e2eSecret)
	s.stop()
	if out, err := check(e2eSecret); err != nil || !strings.Contains(out, "ok    key ") {
		t.Fatalf("right secret: got %v\n%s", err, out)
	}
	out, err := check("a-different-secret-0123456789abcdefghijkl")
	if err == nil || !strings.Contains(err.Error(), "none of the 1 stored keys decrypts") || !strings.Contains(out, "WARN  key") {
		t.Fatalf("wrong secret: got %v\n%s", err, out)
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("listen: \"127.0.0.1:8080\"\nauth:\n  jwt_tll: 1h\n"), 0o600)
	var outBuf bytes.Buffer
	err = run(context.Background(), []string{"check", "-config", bad}, func(string) string { return e2eSecret }, strings.NewReader(""), &outBuf, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "bad.yaml:3") {
		t.Errorf("bad config: got %v, want the file and line 3", err)
	}
}

// TestFlagsAnywhere: flags may follow the positional arguments, as users
// expect ("roles grant EMAIL ROLE -config FILE"), and "--" ends the flags.
func TestFlagsAnywhere(t *testing.T) {
	dir := t.TempDir()
	cfgPath, _ := writeConfig(t, dir, "")
	db, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(dir, "auth.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"-config after EMAIL ROLE", []string{"roles", "grant", "ann@example.com", "admin", "-config", cfgPath}, "no user with email ann@example.com"},
		{"-config=FILE between them", []string{"roles", "grant", "ann@example.com", "-config=" + cfgPath, "admin"}, "no user with email ann@example.com"},
		{"-- ends the flags", []string{"roles", "grant", "-config", cfgPath, "--", "-x@example.com", "admin"}, "no user with email -x@example.com"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), tt.args, func(string) string { return "" }, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
