// Package betterauth reads a Better Auth 1.x database, on PostgreSQL or
// SQLite, into what the sidecar stores: the reading of "authsidecar db
// import-better-auth" (docs/migration.md), which the CLI wires and
// sqlstore's Import writes.
//
// It reads Better Auth's default schema (tables user, account, session,
// verification and the jwt() plugin's jwks, camelCase columns, as its
// migrations make them on either engine) in one read transaction, and
// never writes to it. Users keep their ids; credential accounts keep
// their hashes (Better Auth's scrypt "salt:key" is the sidecar's own
// format); provider accounts of the providers the sidecar is configured
// with are linked, their tokens opened with BETTER_AUTH_SECRET when
// Better Auth encrypted them and sealed with AUTH_SECRET; live sessions
// keep their tokens, so Better Auth's cookies still name them; the admin
// plugin's roles and bans are kept; the jwt() plugin's Ed25519 keys are
// opened with BETTER_AUTH_SECRET and sealed with AUTH_SECRET, so the JWTs
// they signed still verify. What it cannot carry (other providers' links,
// impersonation sessions, pending links, plugins' tables and columns) is
// reported, never silently dropped; a user it cannot carry stops the
// import.
package betterauth
