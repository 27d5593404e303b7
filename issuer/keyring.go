package issuer

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// PublicKey is a verification key the issuer publishes.
type PublicKey struct {
	KID string
	Key ed25519.PublicKey
}

// KeyInfo describes one stored key as seen with the current secret.
type KeyInfo struct {
	KID       string
	CreatedAt time.Time
	ExpiresAt time.Time // zero: no end of signing
	// Usable: the private key decrypts with the current secret and the key
	// is still within publication (expires_at + jwt_ttl).
	Usable  bool
	Problem string // why not usable; empty when usable
	// Signs: this key signs new JWTs now.
	Signs bool
	// SignsFrom is when a key published ahead of use (made by a rotation)
	// starts to sign; zero for any other key.
	SignsFrom time.Time
}

// keyPublishMargin is added to the verifiers' cooldown before a rotated-in
// key signs: for the time between its created_at and its commit, and for
// clock skew between the processes that compare those times.
const keyPublishMargin = 5 * time.Second

// keyEntry is a stored key decoded with the current secret.
type keyEntry struct {
	rec  KeyRecord
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey // nil when it does not decrypt
	err  error
}

// keyring decides which stored keys are usable. It is the one place that
// does so: JWKS, signing and the proxy's key source all go through it.
type keyring struct {
	store    Store
	secret   []byte
	jwtTTL   time.Duration
	now      func() time.Time
	log      *slog.Logger
	onNewKey func(PublicKey)
	// publish is how long a key is in the JWKS before it signs, when an
	// older key can sign meanwhile: the verifiers' unknown-kid cooldown
	// plus keyPublishMargin. Whoever meets its kid then last read the
	// keys either after it was published, or longer than the cooldown
	// ago, and so may read them again.
	publish time.Duration

	mu      sync.Mutex
	decoded map[string]*keyEntry // by kid; decrypting every read is waste, and a bad key is logged once
	create  sync.Mutex           // one key creation at a time
	// announced holds the kids handed to onNewKey: a key another process
	// created (keys rotate) is announced before this process first signs
	// with it, so the verifier never refuses a fresh JWT for a cooldown.
	announced map[string]bool
}

// newKeyring is a keyring for the options of those names; a zero
// cooldown is 30s.
func newKeyring(store Store, secret []byte, jwtTTL, cooldown time.Duration, now func() time.Time, log *slog.Logger, onNewKey func(PublicKey)) *keyring {
	if cooldown <= 0 {
		cooldown = 30 * time.Second
	}
	return &keyring{
		store: store, secret: secret, jwtTTL: jwtTTL, now: now, log: log, onNewKey: onNewKey,
		publish: cooldown + keyPublishMargin, decoded: map[string]*keyEntry{}, announced: map[string]bool{},
	}
}

// decode returns the decoded entry for rec, from cache when the row is unchanged.
func (k *keyring) decode(rec KeyRecord) *keyEntry {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.decoded[rec.ID]; ok && e.rec == rec {
		return e
	}
	e := &keyEntry{rec: rec}
	e.pub, e.err = parsePublicKey(rec.PublicKey)
	if e.err == nil && rec.Alg != "" && rec.Alg != "EdDSA" {
		e.err = fmt.Errorf("unsupported alg %q", rec.Alg)
	}
	if e.err == nil {
		e.priv, e.err = openPrivateKey(k.secret, rec.PrivateKey, e.pub)
	}
	if e.err != nil {
		e.priv = nil
		k.log.Error("signing key unusable: left out of JWKS, every JWT it signed now fails verification",
			"kid", rec.ID, "created_at", rec.CreatedAt, "error", e.err.Error())
	}
	k.decoded[rec.ID] = e
	return e
}

func (k *keyring) usable(e *keyEntry, now time.Time) bool {
	return e.priv != nil && (e.rec.ExpiresAt.IsZero() || now.Before(e.rec.ExpiresAt.Add(k.jwtTTL)))
}

func (k *keyring) signs(e *keyEntry, now time.Time) bool {
	return e.priv != nil && (e.rec.ExpiresAt.IsZero() || now.Before(e.rec.ExpiresAt))
}

// read loads every key row (one query) and decodes it, newest first.
func (k *keyring) read(ctx context.Context) ([]*keyEntry, error) {
	recs, err := k.store.Keys(ctx)
	if err != nil {
		return nil, fmt.Errorf("read keys: %w", err)
	}
	return k.decodeAll(recs), nil
}

// decodeAll decodes recs, newest first.
func (k *keyring) decodeAll(recs []KeyRecord) []*keyEntry {
	out := make([]*keyEntry, 0, len(recs))
	for _, r := range recs {
		out = append(out, k.decode(r))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].rec.CreatedAt.After(out[j].rec.CreatedAt) })
	return out
}

// publicKeys returns the usable keys, newest first.
func (k *keyring) publicKeys(ctx context.Context) ([]PublicKey, error) {
	entries, err := k.read(ctx)
	if err != nil {
		return nil, err
	}
	now := k.now()
	var out []PublicKey
	for _, e := range entries {
		if k.usable(e, now) {
			out = append(out, PublicKey{KID: e.rec.ID, Key: e.pub})
		}
	}
	return out, nil
}

// inspect reports every stored key with its usability.
func (k *keyring) inspect(ctx context.Context) ([]KeyInfo, error) {
	entries, err := k.read(ctx)
	if err != nil {
		return nil, err
	}
	return k.describe(entries), nil
}

// describe reports decoded entries with their usability.
func (k *keyring) describe(entries []*keyEntry) []KeyInfo {
	now := k.now()
	signer := k.signer(entries, now)
	out := make([]KeyInfo, 0, len(entries))
	for _, e := range entries {
		ki := KeyInfo{KID: e.rec.ID, CreatedAt: e.rec.CreatedAt, ExpiresAt: e.rec.ExpiresAt, Usable: k.usable(e, now), Signs: e == signer}
		if signer != nil && k.signs(e, now) && e.rec.CreatedAt.After(signer.rec.CreatedAt) {
			ki.SignsFrom = e.rec.CreatedAt.Add(k.publish)
		}
		switch {
		case e.err != nil:
			ki.Problem = e.err.Error()
		case !ki.Usable:
			ki.Problem = "past publication (expires_at + jwt_ttl)"
		}
		out = append(out, ki)
	}
	return out
}

// signingKey returns the newest key that may sign, creating one when none
// can: on first start, after AUTH_SECRET rotation, or when the last key's
// signing period ended.
func (k *keyring) signingKey(ctx context.Context) (*keyEntry, error) {
	if e, err := k.currentSigner(ctx); err != nil || e != nil {
		if e != nil {
			k.announce(e)
		}
		return e, err
	}
	k.create.Lock()
	defer k.create.Unlock()
	unlock, err := k.store.LockKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock keys: %w", err)
	}
	defer unlock()
	// Another request, or another replica, may have created it while we
	// waited.
	if e, err := k.currentSigner(ctx); err != nil || e != nil {
		if e != nil {
			k.announce(e)
		}
		return e, err
	}
	return k.createKey(ctx, k.now().UTC().Truncate(time.Millisecond))
}

func (k *keyring) currentSigner(ctx context.Context) (*keyEntry, error) {
	entries, err := k.read(ctx)
	if err != nil {
		return nil, err
	}
	return k.signer(entries, k.now()), nil
}

// signer picks the key that signs at now from entries (newest first): the
// newest that may sign and has been published for k.publish; when none
// has, the oldest that may sign, which was published first (a first key
// that is rotated at once; or the only key, made at start or because
// AUTH_SECRET changed and no older key opens). nil when none may.
func (k *keyring) signer(entries []*keyEntry, now time.Time) *keyEntry {
	var oldest *keyEntry
	for _, e := range entries {
		if !k.signs(e, now) {
			continue
		}
		if !now.Before(e.rec.CreatedAt.Add(k.publish)) {
			return e
		}
		oldest = e
	}
	return oldest
}

// hasSigner reports, from memory, whether a key that may sign now is
// known: readiness must not depend on a query.
func (k *keyring) hasSigner() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	for _, e := range k.decoded {
		if k.signs(e, now) {
			return true
		}
	}
	return false
}

// cachedSigner returns, from memory, the key that signs now among those
// known (signer's rule: published for k.publish first, so a verifier has
// it): what the revocation feed signs with, never a query per request. A
// key another process rotated in is learnt at this process's next
// get-session; until then the older one (still published) signs.
func (k *keyring) cachedSigner() *keyEntry {
	k.mu.Lock()
	entries := make([]*keyEntry, 0, len(k.decoded))
	for _, e := range k.decoded {
		entries = append(entries, e)
	}
	k.mu.Unlock()
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].rec.CreatedAt.After(entries[j].rec.CreatedAt) })
	return k.signer(entries, k.now())
}

// rotate creates the next signing key, published at once, and ends the
// signing period of every key that signs now when the new one has been
// published for k.publish: from then on the new key signs. The old ones
// stay published for jwt_ttl after that, so the JWTs they signed keep
// verifying.
func (k *keyring) rotate(ctx context.Context) (*keyEntry, error) {
	k.create.Lock()
	defer k.create.Unlock()
	unlock, err := k.store.LockKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock keys: %w", err)
	}
	defer unlock()
	entries, err := k.read(ctx)
	if err != nil {
		return nil, err
	}
	// The new key goes in first: a get-session between the two steps then
	// sees the old signer still signing, never none.
	// Strictly newer than every key, even within one millisecond: which
	// key is older decides which one signs.
	now := k.now().UTC().Truncate(time.Millisecond)
	for _, e := range entries {
		if !now.After(e.rec.CreatedAt) {
			now = e.rec.CreatedAt.Add(time.Millisecond)
		}
	}
	fresh, err := k.createKey(ctx, now)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if k.signs(e, now) {
			if err := k.store.SetKeyExpiry(ctx, e.rec.ID, now.Add(k.publish)); err != nil {
				return nil, fmt.Errorf("retire key %s: %w", e.rec.ID, err)
			}
		}
	}
	return fresh, nil
}

// createKey makes, stores and announces a new Ed25519 key. The verifier
// hears of it (onNewKey) before the first JWT it signs leaves, so a fresh
// token is never refused while the verifier's refetch cooldown runs.
func (k *keyring) createKey(ctx context.Context, created time.Time) (*keyEntry, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	kid, err := newID()
	if err != nil {
		return nil, err
	}
	sealed, err := sealPrivateKey(k.secret, priv)
	if err != nil {
		return nil, err
	}
	rec := KeyRecord{
		ID:         kid,
		PublicKey:  marshalPublicKey(pub),
		PrivateKey: sealed,
		CreatedAt:  created,
		Alg:        "EdDSA",
		Crv:        "Ed25519",
	}
	if err := k.store.InsertKey(ctx, rec); err != nil {
		return nil, fmt.Errorf("store key: %w", err)
	}
	e := &keyEntry{rec: rec, pub: pub, priv: priv}
	k.mu.Lock()
	k.decoded[kid] = e
	k.mu.Unlock()
	k.log.Info("created signing key", "kid", kid)
	k.announce(e)
	return e, nil
}

// announce hands e to onNewKey once.
func (k *keyring) announce(e *keyEntry) {
	k.mu.Lock()
	if k.announced[e.rec.ID] {
		k.mu.Unlock()
		return
	}
	k.announced[e.rec.ID] = true
	k.mu.Unlock()
	if k.onNewKey != nil {
		k.onNewKey(PublicKey{KID: e.rec.ID, Key: e.pub})
	}
}

// PublicKeys returns the keys JWTs may be verified with: those whose
// private half decrypts with the current secret and that are still within
// publication. It reads the key records (one query).
func (iss *Issuer) PublicKeys(ctx context.Context) ([]PublicKey, error) {
	return iss.keys.publicKeys(ctx)
}

// SignFeed signs payload as a compact JWS under the header typ with the
// key JWTs are signed with, read from memory (no store query): the
// revocation feed's answers, which verifiers check against the JWKS.
func (iss *Issuer) SignFeed(typ string, payload json.RawMessage) (string, error) {
	e := iss.keys.cachedSigner()
	if e == nil {
		return "", errors.New("issuer: no signing key known")
	}
	return signCompact(e, typ, payload)
}

// HasSigningKey reports, without a query, whether a usable signing key is
// known (for readiness).
func (iss *Issuer) HasSigningKey() bool { return iss.keys.hasSigner() }

// RotateKey makes the next signing key. It is published at once and
// signs once it has been published longer than KeyCooldown; then the keys
// signing before stop, but stay in JWKS until the JWTs they signed have
// expired.
func (iss *Issuer) RotateKey(ctx context.Context) (PublicKey, error) {
	e, err := iss.keys.rotate(ctx)
	if err != nil {
		return PublicKey{}, err
	}
	return PublicKey{KID: e.rec.ID, Key: e.pub}, nil
}

// KeyView is how stored keys are judged without an issuer, for "check"
// and the "keys" commands: the Options of those names, with their zero
// values.
type KeyView struct {
	Secret      []byte
	JWTTTL      time.Duration
	KeyCooldown time.Duration
	Now         func() time.Time
	Logger      *slog.Logger
}

func (v KeyView) keyring(store Store) *keyring {
	if v.JWTTTL == 0 {
		v.JWTTTL = 30 * 24 * time.Hour
	}
	if v.Now == nil {
		v.Now = time.Now
	}
	if v.Logger == nil {
		v.Logger = slog.Default()
	}
	return newKeyring(store, v.Secret, v.JWTTTL, v.KeyCooldown, v.Now, v.Logger, nil)
}

// InspectKeys reports every stored key and whether it opens with the
// secret, without creating one.
func InspectKeys(ctx context.Context, store Store, v KeyView) ([]KeyInfo, error) {
	return v.keyring(store).inspect(ctx)
}

// InspectKeyRecords is InspectKeys on records already read, newest first:
// for "check", which reads them through a connection that cannot write
// rather than through a Store.
func InspectKeyRecords(recs []KeyRecord, v KeyView) []KeyInfo {
	k := v.keyring(nil)
	return k.describe(k.decodeAll(recs))
}
