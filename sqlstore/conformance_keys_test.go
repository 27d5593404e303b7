package sqlstore_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/issuer"
	"github.com/authsidecar/authsidecar/sqlstore"
)

func key(id string, created, expires time.Time) issuer.KeyRecord {
	return issuer.KeyRecord{ID: id, PublicKey: `{"crv":"Ed25519","x":"` + id + `","kty":"OKP"}`, PrivateKey: "00aa" + id,
		CreatedAt: created, ExpiresAt: expires}
}

// testKeys: keys come back newest first, exactly as stored; SetKeyExpiry
// changes one key's expiry.
func testKeys(t *testing.T, db *sqlstore.DB, _ env) {
	ctx := context.Background()
	if ks, err := db.Keys(ctx); err != nil || len(ks) != 0 {
		t.Fatalf("Keys on an empty database: got %v %v, want none", ks, err)
	}
	oldest := key("k1", t0, t0.Add(time.Hour))
	newest := key("k3", t0.Add(2*time.Hour), time.Time{})
	middle := key("k2", t0.Add(time.Hour), time.Time{})
	middle.Alg, middle.Crv = "EdDSA", "Ed25519"
	middle.PrivateKey = `"00bbcc"` // a JSON string literal, as Better Auth may store it
	for _, k := range []issuer.KeyRecord{oldest, newest, middle} {
		if err := db.InsertKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.InsertKey(ctx, key("k2", t0, time.Time{})); err == nil {
		t.Error("InsertKey with a taken id: got nil, want an error")
	}
	want := []issuer.KeyRecord{newest, middle, oldest}
	if got, err := db.Keys(ctx); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Keys: got %+v %v, want %+v (newest first)", got, err, want)
	}

	at := t0.Add(3*time.Hour + 456*time.Millisecond)
	if err := db.SetKeyExpiry(ctx, "k3", at); err != nil {
		t.Fatal(err)
	}
	// Re-setting a set expiry replaces it.
	if err := db.SetKeyExpiry(ctx, "k1", at); err != nil {
		t.Fatal(err)
	}
	want[0].ExpiresAt, want[2].ExpiresAt = at, at
	if got, err := db.Keys(ctx); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Keys after SetKeyExpiry: got %+v %v, want %+v", got, err, want)
	}
}

// testKeysNullColumns: a row written by Better Auth (or an older
// authsidecar) with NULL expires_at, alg and crv reads as zero values.
func testKeysNullColumns(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	raw := e.db.raw(t)
	if _, err := raw.ExecContext(ctx, `INSERT INTO jwks (id, public_key, private_key, created_at, expires_at, alg, crv)
		VALUES ('kn', '{}', 'ff', 1748779200000, NULL, NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	want := []issuer.KeyRecord{{ID: "kn", PublicKey: "{}", PrivateKey: "ff", CreatedAt: t0}}
	got, err := db.Keys(ctx)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Keys: got %+v %v, want %+v", got, err, want)
	}
	if !got[0].ExpiresAt.IsZero() {
		t.Errorf("NULL expires_at: got %v, want the zero time", got[0].ExpiresAt)
	}
}

// testLockKeys: on PostgreSQL, LockKeys is held across replicas: a second
// replica waits until the first unlocks, and gives up when its context
// ends. On SQLite one process owns the file and the issuer serializes its
// own key creation, so LockKeys is a no-op that never waits: that
// difference is intended.
func testLockKeys(t *testing.T, db *sqlstore.DB, e env) {
	ctx := context.Background()
	other := e.replica(t)
	unlockA, err := db.LockKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		unlock func()
		err    error
	}
	gotB := make(chan result, 1)
	go func() {
		u, err := other.LockKeys(ctx)
		gotB <- result{u, err}
	}()

	if db.Engine() == "sqlite" {
		select {
		case r := <-gotB:
			if r.err != nil {
				t.Fatal(r.err)
			}
			r.unlock()
		case <-time.After(5 * time.Second):
			t.Fatal("SQLite LockKeys waited for another handle's lock, want a no-op")
		}
		unlockA()
		// Nested on one handle, too.
		u1, err1 := db.LockKeys(ctx)
		u2, err2 := db.LockKeys(ctx)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		u2()
		u1()
		return
	}

	select {
	case r := <-gotB:
		t.Fatalf("replica B took the key lock while A held it (err %v)", r.err)
	case <-time.After(300 * time.Millisecond):
	}
	// While A holds the lock, A can still read and write keys: the lock's
	// connection is not the pool's last.
	if err := db.InsertKey(ctx, key("k1", t0, time.Time{})); err != nil {
		t.Fatalf("InsertKey under the lock: %v", err)
	}
	unlockA()
	var b result
	select {
	case b = <-gotB:
		if b.err != nil {
			t.Fatalf("replica B after A unlocked: %v", b.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("replica B still waits after A unlocked")
	}

	// B holds it now; a waiter whose context ends gives up with an error.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if unlock, err := db.LockKeys(cctx); err == nil {
		unlock()
		t.Fatal("LockKeys while another replica holds it, with a context ending: got the lock, want an error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancelled LockKeys returned after %v, want soon after its context ended", d)
	}
	b.unlock()

	// Nothing is left holding the lock: not B, not the abandoned wait.
	lctx, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	for _, h := range []*sqlstore.DB{db, other} {
		unlock, err := h.LockKeys(lctx)
		if err != nil {
			t.Fatalf("LockKeys after every holder unlocked: %v", err)
		}
		unlock()
	}
}
