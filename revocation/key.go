package revocation

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"
)

// Kind is what a revocation covers.
type Kind uint8

// The kinds. Their names are stored in the database and sent in the feed.
const (
	// KindSession: every JWT minted from one session.
	KindSession Kind = 1 + iota
	// KindUser: every JWT of one user issued at or before the cutoff.
	KindUser
	// KindAll: every JWT issued at or before the cutoff.
	KindAll
)

// Kinds lists every kind, in a fixed order (metrics pre-create a series
// for each).
func Kinds() []Kind { return []Kind{KindSession, KindUser, KindAll} }

func (k Kind) String() string {
	switch k {
	case KindSession:
		return "session"
	case KindUser:
		return "user"
	case KindAll:
		return "all"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind reads a kind's name.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds() {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown revocation kind %q", s)
}

// Record is one stored revocation. Subject is the session id (never its
// cookie token) or the user id, empty for KindAll. At is the cutoff
// (user, all) or when the session ended; both are kept to the
// millisecond.
type Record struct {
	ID      int64 // the store's, increasing in commit order; 0 before it is stored
	Kind    Kind
	Subject string
	At      time.Time
}

// Entry is a revocation as the Set and the feed hold it: the subject only
// as its Key.
type Entry struct {
	Kind Kind
	Key  uint64 // SessionKey or UserKey of the subject; 0 for KindAll
	At   int64  // Unix milliseconds
}

// Entry returns r as the Set holds it.
func (r Record) Entry() Entry {
	e := Entry{Kind: r.Kind, At: r.At.UnixMilli()}
	switch r.Kind {
	case KindSession:
		e.Key = SessionKey(r.Subject)
	case KindUser:
		e.Key = UserKey(r.Subject)
	}
	return e
}

// Token is what the check needs of a verified JWT: the keys of its sid
// and sub, and when it was issued, to the millisecond.
type Token struct {
	Session  uint64 // SessionKey(sid); 0 when the token has no sid
	User     uint64 // UserKey(sub)
	IssuedAt int64  // Unix milliseconds
}

// TokenOf returns the Token of a JWT with these claims. sid may be empty
// (a token from before sids, or from another issuer).
func TokenOf(sid, sub string, issuedAt time.Time) Token {
	t := Token{User: UserKey(sub), IssuedAt: issuedAt.UnixMilli()}
	if sid != "" {
		t.Session = SessionKey(sid)
	}
	return t
}

// SessionKey and UserKey are the first 64 bits of SHA-256 over the kind's
// domain and the id. The feed carries only these: a verifier learns that
// some session ended, never which id. The domains keep a session id from
// ever matching a user id. 0 is reserved (no key), so a hash of 0 becomes 1.
func SessionKey(sid string) uint64 { return key("authsidecar revocation session\x00", sid) }

// UserKey: see SessionKey.
func UserKey(sub string) uint64 { return key("authsidecar revocation user\x00", sub) }

func key(domain, id string) uint64 {
	// On the stack for the ids we make (32 characters); a longer one
	// (another issuer's sub) costs an allocation.
	var buf [96]byte
	b := append(append(buf[:0], domain...), id...)
	sum := sha256.Sum256(b)
	k := binary.BigEndian.Uint64(sum[:8])
	if k == 0 {
		return 1
	}
	return k
}
