package sidecar

import (
	"strings"
	"testing"
	"time"
)

func TestBufferedLogDelivers(t *testing.T) {
	var dst syncBuffer
	b := newBufferedLog(&dst)
	b.Write([]byte("one\n"))
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(dst.String(), "one") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(dst.String(), "one") {
		t.Fatal("a line never reached the destination without Close")
	}
	b.Write([]byte("two\n"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := dst.String(); got != "one\ntwo\n" {
		t.Fatalf("got %q, want both lines after Close", got)
	}
}
