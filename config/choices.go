package config

// The string choices of the file, as types: code compares against these
// constants, so a misspelt choice does not compile, and Validate lists
// the allowed ones from the same place.

// Mode is what the sidecar does: [ModeFull] or [ModeVerifier].
type Mode string

const (
	// ModeFull issues and verifies, serving /api/auth/* from its own
	// database.
	ModeFull Mode = "full"
	// ModeVerifier only verifies, against the public keys of
	// Keys.JWKSURL, and serves no /api/auth/*.
	ModeVerifier Mode = "verifier"
)

// Driver is a storage engine.
type Driver string

const (
	DriverSQLite   Driver = "sqlite"
	DriverPostgres Driver = "postgres"
	// DriverNone is no database: verifier mode only.
	DriverNone Driver = "none"
)

// Delivery is how mails leave the outbox.
type Delivery string

const (
	DeliveryOff     Delivery = "off"
	DeliverySMTP    Delivery = "smtp"
	DeliveryWebhook Delivery = "webhook"
	DeliveryLog     Delivery = "log"
)

// SMTPTLS is how the connection to the mail server is protected.
type SMTPTLS string

const (
	TLSStartTLS SMTPTLS = "starttls"
	TLSImplicit SMTPTLS = "implicit"
	// TLSNone is allowed only to a loopback address.
	TLSNone SMTPTLS = "none"
)

// LogFormat is the shape of log lines.
type LogFormat string

const (
	FormatJSON LogFormat = "json"
	FormatText LogFormat = "text"
)

// LogLevel is the least severe level logged.
type LogLevel string

const (
	LevelDebug LogLevel = "debug"
	LevelInfo  LogLevel = "info"
	LevelWarn  LogLevel = "warn"
	LevelError LogLevel = "error"
)

// SameSite is the session cookie's SameSite attribute.
type SameSite string

const (
	SameSiteLax    SameSite = "lax"
	SameSiteStrict SameSite = "strict"
	SameSiteNone   SameSite = "none"
)
