// Package mail delivers account-recovery messages (password reset and email
// verification links) through a durable outbox.
//
// The issuer writes a sealed Message into the outbox in the same transaction
// as the token it links to; a Worker later claims rows with a lease, opens
// them with the Box, hands them to a Sender (SMTP, a signed webhook, or the
// log) and acknowledges or reschedules them. Nothing here knows the store:
// the Worker reaches it through the small Queue interface, which sqlstore
// implements, so the package imports neither issuer nor sqlstore.
//
// A Message holds a usable link, so it exists in plain text only in memory:
// at rest it is sealed (XChaCha20-Poly1305 under a key derived from
// AUTH_SECRET, bound to its row id), and the only component that ever
// writes the link to a log is the log sender, which exists for development.
package mail
