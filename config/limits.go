package config

// Limits bounds what one client can make the sidecar do.
type Limits struct {
	// BodyBytes is the largest request body the sidecar reads for its own
	// endpoints (sign-in, sign-up, ...). Default 65536. Between 1024 and
	// 16 MiB. Proxied bodies are the upstream's business and not limited.
	BodyBytes int64 `yaml:"body_bytes"`
	// SigninPerEmail limits sign-in attempts per email address, slowing
	// password guessing against one account. Default "5/m". Zero: off.
	// It is checked before the password, so it refuses the right one too:
	// whoever guesses at an address locks its owner out of signing in for
	// as long as the guessing lasts (a minute after the last try, at the
	// default). Those refusals are counted apart, as
	// authsidecar_signins_total{result="locked_out"}.
	SigninPerEmail Rate `yaml:"signin_per_email"`
	// SigninPerIP limits sign-in attempts per client IP, slowing password
	// spraying across accounts. Default "20/m". Zero: off.
	SigninPerIP Rate `yaml:"signin_per_ip"`
	// SignupPerIP limits account creation per client IP. Default "10/m".
	// Zero: off.
	SignupPerIP Rate `yaml:"signup_per_ip"`
	// PasswordHashConcurrency bounds concurrent password hashes, which are
	// deliberately expensive; excess requests wait. Default 0, meaning
	// GOMAXPROCS. Must not be negative.
	PasswordHashConcurrency int `yaml:"password_hash_concurrency"`
	// MailPerEmail limits reset mails, and separately verification mails,
	// per address (each type its own budget), counted
	// in the database so it holds across replicas. Over it the answer does
	// not change (200) and no mail is queued, for known and unknown
	// addresses alike. Default "3/h". Zero: off.
	MailPerEmail Rate `yaml:"mail_per_email"`
	// MailPerIP limits request-password-reset and send-verification-email
	// calls per client IP (429 beyond). Default "10/h". Zero: off.
	MailPerIP Rate `yaml:"mail_per_ip"`
	// TokenPerIP limits uses of reset and verification links (reset-password,
	// verify-email) per client IP, slowing a token-guessing run (429
	// beyond). Default "30/m". Zero: off.
	TokenPerIP Rate `yaml:"token_per_ip"`
	// PasswordCheckPerUser limits checks of a signed-in user's current
	// password (change-password, and every endpoint that asks for it) per
	// user, counted in the database so it holds across replicas: whoever
	// holds a stolen cookie cannot guess the password at hashing speed.
	// 429 beyond, before any hashing. Default "5/m". Zero: off.
	PasswordCheckPerUser Rate `yaml:"password_check_per_user"`
	// PasswordCheckPerIP limits the same checks per client IP, across
	// users. Default "20/m". Zero: off.
	PasswordCheckPerIP Rate `yaml:"password_check_per_ip"`
	// IPv6Prefix is the prefix length by which every per-IP limit (and
	// each client's fair share of password hashing) groups IPv6 clients:
	// an ordinary IPv6 client holds a whole /64 and could otherwise rotate
	// addresses to dodge every limit. IPv4 clients are counted per
	// address. Default 64. Between 32 and 128 (128: per address).
	IPv6Prefix int `yaml:"ipv6_prefix"`
	// BodyReadTimeout bounds the time the sidecar waits for the body of a
	// request to its own endpoints (/api/auth/*), from the moment it
	// starts handling it: a client trickling a body would otherwise hold
	// a connection and a handler for as long as it likes. 408 beyond.
	// Default 10s. Between 1s and 5m. Proxied bodies stream to the
	// upstream and are bounded by its timeouts, not this.
	BodyReadTimeout Duration `yaml:"body_read_timeout"`
}
