package proxy_test

import (
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/proxy"
)

// TestKeyCacheSetters: MaxAge, Cooldown and StaleIfError changed on a live
// cache (a config reload) govern the next lookup.
func TestKeyCacheSetters(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	src := &hangingKeys{keys: []proxy.Key{{KID: "k1", Public: pub}}}
	c := &clock{t: time.Now()}
	kc := proxy.NewKeyCache(proxy.KeyCacheOptions{
		Source: src, RetryBackoff: time.Hour, Now: c.Now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	defer kc.Close()
	if err := kc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Cooldown: 30s by default lets a miss read after a minute; 10m does not.
	c.Add(time.Minute)
	before := src.calls.Load()
	kc.Lookup(ctx, "unknown")
	if got := src.calls.Load() - before; got != 1 {
		t.Fatalf("miss past the default cooldown: got %d reads, want 1", got)
	}
	kc.SetCooldown(10 * time.Minute)
	c.Add(time.Minute)
	before = src.calls.Load()
	kc.Lookup(ctx, "unknown")
	if got := src.calls.Load() - before; got != 0 {
		t.Errorf("miss within a cooldown raised to 10m: got %d reads, want 0", got)
	}

	// MaxAge: keys a minute old are fresh under the default 10m, stale
	// (a background read) under 30s.
	kc.SetCooldown(time.Second)
	before = src.calls.Load()
	kc.Lookup(ctx, "k1")
	if got := src.calls.Load() - before; got != 0 {
		t.Fatalf("known kid, keys 1m old, max_age 10m: got %d reads, want 0", got)
	}
	kc.SetMaxAge(30 * time.Second)
	kc.Lookup(ctx, "k1")
	deadline := time.Now().Add(5 * time.Second)
	for src.calls.Load() == before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := src.calls.Load() - before; got != 1 {
		t.Errorf("known kid, keys 1m old, max_age lowered to 30s: got %d reads, want 1", got)
	}
	for kc.Age() != 0 && time.Now().Before(deadline) { // the background read has landed
		time.Sleep(5 * time.Millisecond)
	}

	// StaleIfError: zero keeps failing keys usable; 1m makes keys read 2m
	// ago unusable at once.
	src.fail.Store(true)
	c.Add(2 * time.Minute)
	kc.Lookup(ctx, "unknown") // a failed read
	if !kc.Usable() {
		t.Fatal("failing source, stale_if_error zero (forever): keys unusable, want usable")
	}
	kc.SetStaleIfError(time.Minute)
	if kc.Usable() {
		t.Error("failing source, keys 2m old, stale_if_error lowered to 1m: usable, want unusable")
	}
	kc.SetStaleIfError(time.Hour)
	if !kc.Usable() {
		t.Error("failing source, keys 2m old, stale_if_error raised to 1h: unusable, want usable")
	}
}
