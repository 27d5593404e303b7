// Package userimport reads users exported from another application (JSON
// Lines or CSV), checks every line, and hands them to a store in batches:
// the reading and checking of "authsidecar users import", shared by the
// CLI, which wires it, and the store, which writes what it validated.
//
// A line becomes a Record: its id kept (ValidUserID's rule, so the
// application's foreign keys keep working) or generated, its email
// lower-cased and checked as sign-up checks it, its password hash parsed
// and bounded by passhash (never recomputed), its roles checked as
// "roles grant" checks them. A line that fails is refused with its number
// and the reason, and the import goes on, up to Options.MaxErrors.
//
// Memory is bounded whatever the file's size: lines are read one at a
// time (at most MaxLineBytes each), batches are Options.BatchSize records,
// and the ids and emails of earlier lines are remembered as 64-bit hashes
// (about 20 bytes per value, so 40 MiB for a million lines with ids), not
// as strings. The store's unique constraints stay the final arbiter of
// what exists.
package userimport
