package main

import (
	"os"
	"testing"

	"github.com/authsidecar/authsidecar/internal/pgtest"
)

// TestMain stops the throwaway PostgreSQL cluster the tests may have
// started and removes the binary the process tests built.
func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}
