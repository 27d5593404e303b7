// Package revocation takes issued JWTs back within seconds without a
// database query per request.
//
// A revocation names what it covers: one session (every JWT minted from it:
// the token's "sid"), one user up to a cutoff (every JWT of "sub" issued at
// or before it), or everyone up to a cutoff (every JWT issued at or before
// it). It is written in the transaction of what caused it (a sign-out, a
// password reset, a ban) and expires once the newest token it could cover
// has expired: jwt_ttl plus the leeway after its time.
//
// Every process holds the live revocations in memory, in a [Set] the
// verifier consults after the signature check, cached tokens included: a
// few sorted arrays of 64-bit truncated SHA-256 hashes, 13 bytes a
// revocation. The business path never reaches a store: a full sidecar
// fills its Set with a [Poller], one indexed query per poll interval
// whatever the traffic; a verifier fills its own from the issuer's feed
// (GET /api/auth/revocations, a [Feed] served from memory, long-polled,
// signed with the JWKS signing key, each page built once for all its
// askers and paid from a budget of builds) with a [Client].
//
// The file docs/revocation.md holds the whole design, its measured bound
// and its memory sizing.
package revocation
