// Package issuer serves /api/auth/*: email/password sign-up and sign-in with
// cookie sessions, get-session and token issuing EdDSA JWTs, sign-out,
// change-password and the public key set at /api/auth/jwks.
//
// It is wire-compatible with Better Auth's email/password and JWT plugin
// endpoints (as observed on a real Better Auth 1.7.25 server; docs/protocol.md), so Better Auth's
// clients work unchanged, except where the contract differs: JWTs live
// jwt_ttl (30 days by default) rather than 15 minutes, and POST get-session
// issues a JWT too.
//
// Storage is behind the small Store interface declared here; the sqlite
// package implements it. Private keys are stored as Better Auth stores them:
// XChaCha20-Poly1305 under SHA-256(AUTH_SECRET).
package issuer
