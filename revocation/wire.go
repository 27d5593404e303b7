package revocation

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The feed's wire format: GET <issuer>/api/auth/revocations?since=C&wait=S
// answers 200 with a compact JWS (content type application/jwt), signed
// with a key of the issuer's JWKS under the header typ FeedType, so no
// verifier can take it for a user token (ours refuses any typ but JWT;
// its aud is no user token's either, and it has no sub). Its payload:
//
//	{"iss": issuer, "aud": "authsidecar-revocations", "iat", "exp",
//	 "since": C as asked, "cursor": where to go on from,
//	 "reset": the entries start a full sync (drop what you hold once it
//	          completes), "complete": nothing more to read now (else ask
//	          again at once, with wait 0),
//	 "all": the latest global cutoff in these entries (ms, 0 none),
//	 "sessions", "users": base64 of big-endian (key uint64, at int64)
//	          pairs: the truncated hashes of ids, never the ids}
//
// A cursor is the last revocation id the answer covers ("1234"); "" asks
// for a full sync, which comes in pages whose cursors read
// "s.<head>.<kind>.<after>": the sync's head (every revocation up to that
// id is in its pages), the kind the page lists (1 sessions, 2 users) and
// the last key listed so far, in hex (0: the kind's start). A cursor from
// another database (a verifier pointed elsewhere, a restored backup) gets
// a full sync.
//
// Every cursor has one spelling, the one the feed writes (decimal and
// lowercase hex without leading zeros or sign); any other is refused (400
// INVALID_CURSOR): an answer echoes its since and is signed for it, so
// each spelling would cost a page built and signed of its own. A cursor
// that names no real position (a head that was never one, a key this
// process does not hold) is answered with a small redirect to the real
// one it stands for, so only real positions are built (feed.go).

// FeedType is the JWS typ of a feed answer.
const FeedType = "authsidecar-revocations+jwt"

// feedAudience is a feed answer's aud: never a user token's.
const feedAudience = "authsidecar-revocations"

// feedPayload is a feed answer's JWS payload.
type feedPayload struct {
	Iss      string `json:"iss"`
	Aud      string `json:"aud"`
	Iat      int64  `json:"iat"`
	Exp      int64  `json:"exp"`
	Since    string `json:"since"`
	Cursor   string `json:"cursor"`
	Reset    bool   `json:"reset"`
	Complete bool   `json:"complete"`
	All      int64  `json:"all"`
	Sessions []byte `json:"sessions"`
	Users    []byte `json:"users"`
}

// feedLifetime bounds how long an answer is good for: an old one replayed
// says nothing of revocations since.
const feedLifetime = 60 // seconds

// encodePairs packs entries of one kind as big-endian (key, at) pairs.
func encodePairs(es []Entry) []byte {
	out := make([]byte, 0, 16*len(es))
	for _, e := range es {
		out = binary.BigEndian.AppendUint64(out, e.Key)
		out = binary.BigEndian.AppendUint64(out, uint64(e.At))
	}
	return out
}

// decodePairs unpacks encodePairs' output as entries of kind.
func decodePairs(b []byte, kind Kind) ([]Entry, error) {
	if len(b)%16 != 0 {
		return nil, fmt.Errorf("%s entries: %d bytes is not a whole number of 16-byte pairs", kind, len(b))
	}
	out := make([]Entry, len(b)/16)
	for i := range out {
		p := b[16*i:]
		out[i] = Entry{Kind: kind, Key: binary.BigEndian.Uint64(p), At: int64(binary.BigEndian.Uint64(p[8:]))}
		if out[i].Key == 0 || out[i].At <= 0 {
			return nil, fmt.Errorf("%s entry %d: key or time is zero", kind, i)
		}
	}
	return out, nil
}

// cursor is a parsed since: an id (incremental), or a full sync's page.
type cursor struct {
	full  bool
	id    int64  // incremental: the last id held; full: the head the sync ends at
	kind  Kind   // full: the kind this page lists
	after uint64 // full: the last key listed so far
	start bool   // full: the first page ("")
}

// errCursor is a since the feed did not write.
var errCursor = errors.New("not a cursor this feed writes")

// parseCursor reads a since, in its one spelling: parsed, it must read
// back as it came.
func parseCursor(s string) (cursor, error) {
	if s == "" {
		return cursor{full: true, start: true}, nil
	}
	var c cursor
	if rest, ok := strings.CutPrefix(s, "s."); ok {
		parts := strings.Split(rest, ".")
		if len(parts) != 3 {
			return cursor{}, fmt.Errorf("full-sync cursor: %w", errCursor)
		}
		id, err1 := strconv.ParseInt(parts[0], 10, 64)
		kind, err2 := strconv.ParseUint(parts[1], 10, 8)
		after, err3 := strconv.ParseUint(parts[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil || id < 0 || (Kind(kind) != KindSession && Kind(kind) != KindUser) {
			return cursor{}, fmt.Errorf("full-sync cursor: %w", errCursor)
		}
		c = cursor{full: true, id: id, kind: Kind(kind), after: after}
	} else {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id < 0 {
			return cursor{}, fmt.Errorf("revocation id: %w", errCursor)
		}
		c = cursor{id: id}
	}
	if c.String() != s {
		// "s.00.1.0", "+5", "s.0.1.00ff", "s.0.1.FF": the position is
		// real, the spelling is not the feed's.
		return cursor{}, fmt.Errorf("spelling: %w", errCursor)
	}
	return c, nil
}

func (c cursor) String() string {
	if !c.full {
		return strconv.FormatInt(c.id, 10)
	}
	return "s." + strconv.FormatInt(c.id, 10) + "." + strconv.Itoa(int(c.kind)) + "." + strconv.FormatUint(c.after, 16)
}
