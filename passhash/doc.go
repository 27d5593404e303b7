// Package passhash reads password hashes written by other systems and
// checks passwords against them, so that users imported with their hashes
// sign in with the passwords they had.
//
// Parse looks at a stored value's own prefix or shape (as Ory Kratos'
// hash package does) and returns a Hash of one format, or refuses it with
// a reason: a format it does not know, a value that is not well formed,
// parameters beyond the cost bounds (a hash that would take far more time
// or memory than the sidecar's own), or a weak format not allowed by
// Options. Parsing computes no hash, so an import can check millions of
// values; Hash.Verify computes one and compares in constant time.
//
// The formats, and the systems that write them:
//
//   - Scrypt: the sidecar's and Better Auth's own "saltHex:keyHex";
//   - Bcrypt: "$2a$", "$2b$", "$2y$" (Devise, Laravel, Spring Security,
//     PHP's password_hash, passlib, bcryptjs);
//   - Argon2id, Argon2i: PHC strings "$argon2id$v=19$m=…,t=…,p=…$salt$hash"
//     (PHP's password_hash, argon2-cffi, passlib, node-argon2);
//   - ScryptPHC: passlib's "$scrypt$ln=…,r=…,p=…$salt$hash";
//   - DjangoPBKDF2SHA256, DjangoPBKDF2SHA1: Django's
//     "pbkdf2_sha256$iterations$salt$hash";
//   - PasslibPBKDF2SHA256, PasslibPBKDF2SHA512: passlib's
//     "$pbkdf2-sha256$rounds$salt$hash" in its adapted base64;
//   - ASPNetIdentityV2, ASPNetIdentityV3: ASP.NET (Core) Identity's
//     base64 blobs;
//   - PHPass: "$P$" and "$H$" (WordPress before 6.8, phpBB);
//   - the weak formats, refused unless Options.AllowWeak: bare hex digests
//     (MD5, SHA1, SHA256: unsalted) and Django's "md5$salt$hex" and
//     "sha1$salt$hex" (MD5Salted, SHA1Salted), with SHA256Salted as the same
//     recipe over SHA-256.
//
// Every format except Scrypt is foreign: Format.Native says so, and the
// issuer replaces a foreign hash with its own on the first sign-in that
// proves the password.
package passhash
