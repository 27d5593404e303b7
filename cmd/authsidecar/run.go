package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/authsidecar/authsidecar/internal/buildinfo"
)

var (
	// errUsage marks a command-line mistake (exit status 2).
	errUsage = errors.New("usage")
	// errReported means the message was already written to stderr.
	errReported = errors.New("already reported")
)

// command is one CLI verb, or one subcommand of a verb.
type command struct {
	name    string
	summary string
	// args is the positional synopsis for usage ("EMAIL ROLE"); empty: none.
	args string
	// detail is printed under the summary in -h. Zero: nothing more.
	detail string
	// secret says whether the command reads AUTH_SECRET (shown in -h).
	secret bool
	// minArgs and maxArgs bound the positional arguments. Zero: none.
	minArgs, maxArgs int
	// run does the work; unused when subs is set.
	run func(ctx context.Context, e *cliEnv, args []string) error
	// subs, when set, makes SUB required: the command is one of these and
	// run is unused.
	subs []command
	// flags, when set, defines the command's own flags on fs, stored in
	// e for run. Zero: -config only.
	flags func(fs *flag.FlagSet, e *cliEnv)
}

// cliEnv is what a command may touch: no globals, so tests call run.
type cliEnv struct {
	getenv     func(string) string
	stdin      io.Reader
	stdout     io.Writer
	stderr     io.Writer
	configPath string
	// configSet says -config was given, not defaulted.
	configSet bool
	// ban holds "users ban"'s flags.
	ban banFlags
	// imp holds "users import"'s flags.
	imp importFlags
	// ba holds "db import-better-auth"'s flags.
	ba betterAuthFlags
	// online: check contacts the identity providers (-online).
	online bool
}

var commands = []command{
	{name: "serve", summary: "run the sidecar", secret: true, run: cmdServe},
	{name: "check", summary: "validate the config, the secret, the database and the keys, read-only; report every problem in one run", secret: true, run: cmdCheck,
		detail: "Read-only: check never creates, migrates or writes a database. A missing SQLite file is\n" +
			"reported as created by the first serve (once its directory is found writable), an older\n" +
			"schema as migrations serve applies, a PostgreSQL database without tables as tables serve\n" +
			"creates. It decrypts the stored signing keys with the secret (verifier mode: fetches the\n" +
			"JWKS once). With -online it also fetches each identity provider's discovery document and\n" +
			"JWKS and says what it found (without it, providers are not contacted). Every problem is printed as a FAIL line, then their count; the exit status is 1\n" +
			"if there is any. When the config does not load, the secret is still checked, under the\n" +
			"auth.secret_env the file names (or AUTH_SECRET)."},
	{name: "version", summary: "print the version", run: cmdVersion},
	{name: "demo", summary: "run a throwaway sidecar with an echo upstream and print a curl walkthrough (no config, no secret needed)", run: cmdDemo},
	{name: "keys", summary: "list and rotate the JWT signing keys", subs: []command{
		{name: "list", summary: "list the signing keys and whether each is usable with the current secret", secret: true, run: cmdKeysList},
		{name: "rotate", summary: "make a new signing key; old keys stay in JWKS until their JWTs expire", secret: true, run: cmdKeysRotate,
			detail: "A running sidecar needs no restart: get-session reads the key records and signs with the\nnewest key, and the verifier learns the new kid the first time a JWT names it (one key\nread, at most once per keys.cooldown)."},
		{name: "revoke-all", summary: "revoke every JWT issued up to now, for everyone; keys and cookie sessions stay", run: cmdKeysRevokeAll,
			detail: "What rotating AUTH_SECRET did, without losing the signing keys or the cookie sessions:\nrunning sidecars refuse every older JWT within revocation.poll_interval, verifiers within\ntheir feed's bound; a client's next get-session mints a JWT that works."},
	}},
	{name: "roles", summary: "grant, revoke and list the roles admin routes check", subs: []command{
		{name: "grant", args: "EMAIL ROLE", minArgs: 2, maxArgs: 2, summary: "give the user EMAIL the role ROLE ([a-z0-9_-]+)", run: cmdRolesGrant,
			detail: "Admin routes read user_role on every request: it takes effect on the next one."},
		{name: "revoke", args: "EMAIL ROLE", minArgs: 2, maxArgs: 2, summary: "take the role ROLE from the user EMAIL", run: cmdRolesRevoke,
			detail: "Admin routes read user_role on every request: it takes effect on the next one."},
		{name: "list", args: "[EMAIL]", maxArgs: 1, summary: "list granted roles, of every user or of EMAIL", run: cmdRolesList},
	}},
	{name: "users", summary: "list, delete, revoke and ban users, set a password, make a reset link, import users", subs: []command{
		{name: "list", summary: "list users: id, email, name, created, live sessions", run: cmdUsersList},
		{name: "delete", args: "EMAIL", minArgs: 1, maxArgs: 1, summary: "delete the user EMAIL with its sessions, roles and password", run: cmdUsersDelete,
			detail: "Every JWT issued to the user is revoked in the same transaction: running sidecars refuse\nit within revocation.poll_interval, verifiers within their feed's bound."},
		{name: "set-password", args: "EMAIL", minArgs: 1, maxArgs: 1, summary: "set the password of EMAIL, read from the first line of stdin", secret: true, run: cmdUsersSetPassword,
			detail: "The password is the first line of stdin without its line ending, within\nauth.min_password_length and auth.max_password_length characters. Sessions are kept.\nExample: authsidecar users set-password ann@example.com < new-password.txt"},
		{name: "revoke", args: "EMAIL", minArgs: 1, maxArgs: 1, summary: "sign EMAIL out everywhere: end its sessions, revoke every JWT issued to it up to now", run: cmdUsersRevoke,
			detail: "Running sidecars refuse the user's older JWTs within revocation.poll_interval, verifiers\nwithin their feed's bound; a new sign-in works at once."},
		{name: "ban", args: "EMAIL", minArgs: 1, maxArgs: 1, summary: "ban EMAIL: sign-in answers 403 BANNED_USER; its sessions end and its JWTs are revoked", run: cmdUsersBan, flags: defineBanFlags,
			detail: "Example: authsidecar users ban -reason \"spam\" -until 72h ann@example.com\nThe ban holds until users unban, or -until from now."},
		{name: "unban", args: "EMAIL", minArgs: 1, maxArgs: 1, summary: "lift the ban of EMAIL; what the ban revoked stays revoked", run: cmdUsersUnban},
		{name: "reset-link", args: "EMAIL", minArgs: 1, maxArgs: 1, summary: "print a single-use password-reset link for EMAIL (nothing is mailed)", run: cmdUsersResetLink,
			detail: "The link opens the sidecar's reset page (or auth.reset_page_url) and works once, until\nauth.reset_token_ttl; it replaces the user's older reset links. Works whatever\nemail.delivery says. Only the link's hash is stored."},
		{name: "import", args: "FILE", minArgs: 1, maxArgs: 1, summary: "import users from a JSON Lines or CSV FILE (- for stdin) with their ids, password hashes and roles", run: cmdUsersImport, flags: defineImportFlags,
			detail: "Fields: id, email (required), name, email_verified, image, created_at (RFC 3339 or Unix ms),\n" +
				"password_hash (bcrypt, argon2, scrypt, PBKDF2, phpass...: docs/migration.md), roles (a list;\n" +
				"in CSV \"admin;ops\"). A given id is kept as the user id (the JWT's sub, X-User-Id): 1 to 128\n" +
				"bytes of [A-Za-z0-9._:@-]; a line without one gets a generated id. Every refused line is\n" +
				"printed with its number and reason, and nothing of it is written. Batches of 10,000 lines are\n" +
				"written one transaction each: after an interruption, run it again with -on-conflict skip.\n" +
				"SQLite: stop the sidecar first (-dry-run may run beside it); PostgreSQL: import while it serves.\n" +
				"Example: authsidecar users import -dry-run users.jsonl && authsidecar users import users.jsonl"},
	}},
	{name: "outbox", summary: "show and re-queue password-reset and verification mails", subs: []command{
		{name: "list", args: "[pending|delivered|dead]", maxArgs: 1, summary: "list queued, delivered and dead messages (never their content)", run: cmdOutboxList},
		{name: "retry", args: "ID", minArgs: 1, maxArgs: 1, summary: "send message ID again: a pending one now, a dead one as a new link for the same user", secret: true, run: cmdOutboxRetry,
			detail: "A dead message's link was deleted with it (the database never keeps a usable link), so\nretrying it makes a new link of the same kind for the same user, queued as a new\nmessage; the user's older links of that kind stop working. A running sidecar sends it\nat its next poll (within 5 s)."},
	}},
	{name: "db", summary: "database maintenance", subs: []command{
		{name: "backup", args: "FILE", minArgs: 1, maxArgs: 1, summary: "copy the live SQLite database to FILE (VACUUM INTO), safe while serving", run: cmdDBBackup,
			detail: "FILE must not exist; it is created with mode 0600. SQLite only: back PostgreSQL up with\n" +
				"pg_dump (pg_dump -Fc \"$DATABASE_URL\" > authsidecar.dump), which is also safe while serving."},
		{name: "copy", args: "SOURCE-CONFIG", minArgs: 1, maxArgs: 1, summary: "copy users, sessions, keys, roles, recovery tokens and the outbox from SOURCE-CONFIG's database into -config's empty one", run: cmdDBCopy,
			detail: "The move from SQLite to PostgreSQL: authsidecar db copy -config postgres.yaml sqlite.yaml\n" +
				"The target must be empty (a missing SQLite target file is created); everything is\n" +
				"copied in one transaction, or nothing. Signing keys are copied sealed: both configs must\n" +
				"use the same AUTH_SECRET for the copied keys, sessions and JWTs to stay valid. Stop the\n" +
				"source's sidecar first, or sign-ups after the copy starts are not in it."},
		{name: "import-better-auth", summary: "take over a Better Auth database: users (ids kept), passwords, provider accounts, live sessions, roles and signing keys, into -config's empty one", secret: true, run: cmdDBImportBetterAuth, flags: defineBetterAuthFlags,
			detail: "Reads Better Auth 1.x's default schema (user, account, session, verification, jwks) on\n" +
				"PostgreSQL or SQLite and writes into -config's empty database in one transaction, or\n" +
				"nothing. Needs auth.better_auth_secret_env naming the old BETTER_AUTH_SECRET: its signing\n" +
				"keys are opened with it and sealed with AUTH_SECRET, and serve then accepts Better Auth's\n" +
				"session cookies, so no one is signed out. Provider accounts are linked for the\n" +
				"identity_providers configured; what is not carried is listed. Stop Better Auth first.\n" +
				"Example: authsidecar db import-better-auth -dry-run -from env:BETTER_AUTH_DATABASE_URL"},
	}},
}

// run is main without the process: it parses args, runs one command and
// returns its error.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || isHelp(args[0]) {
		usage(stderr)
		if len(args) == 0 {
			return fmt.Errorf("%w: no command given", errUsage)
		}
		return nil
	}
	c, ok := lookup(commands, args[0])
	if !ok {
		usage(stderr)
		return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
	path, rest := c.name, args[1:]
	if c.subs != nil {
		switch {
		case len(rest) == 0:
			return fmt.Errorf("%w: %s needs a subcommand: %s", errUsage, c.name, subNames(c))
		case isHelp(rest[0]):
			subUsage(stderr, c)
			return nil
		case strings.HasPrefix(rest[0], "-"):
			return fmt.Errorf("%w: %s needs a subcommand before flags (%s), got %s", errUsage, c.name, subNames(c), rest[0])
		}
		sub, ok := lookup(c.subs, rest[0])
		if !ok {
			return fmt.Errorf("%w: unknown %s subcommand %q: want %s", errUsage, c.name, rest[0], subNames(c))
		}
		c, path, rest = sub, path+" "+sub.name, rest[1:]
	}
	e := &cliEnv{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("authsidecar "+path, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&e.configPath, "config", "sidecar.yaml", "configuration `file`")
	if c.flags != nil {
		c.flags(fs, e)
	}
	if path == "check" {
		fs.BoolVar(&e.online, "online", false, "also fetch each identity provider's discovery document and JWKS")
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: authsidecar %s [-config FILE]%s\n\n%s.\n", path, prefixed(" ", c.args), upperFirst(c.summary))
		if c.detail != "" {
			fmt.Fprintln(stderr, c.detail)
		}
		if c.secret {
			fmt.Fprintln(stderr, "Needs the secret in the environment variable named by auth.secret_env (default AUTH_SECRET).")
		} else {
			fmt.Fprintln(stderr, "Does not need the secret.")
		}
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	rest, err := parseFlags(fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) { e.configSet = e.configSet || f.Name == "config" })
	if len(rest) < c.minArgs || len(rest) > c.maxArgs {
		if c.maxArgs == 0 {
			return noArgs(path, rest)
		}
		return fmt.Errorf("%w: %s takes %s, got %s", errUsage, path, c.args, plural(len(rest), "argument"))
	}
	return c.run(ctx, e, rest)
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

func lookup(cs []command, name string) (command, bool) {
	for _, c := range cs {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func subNames(c command) string {
	names := make([]string, len(c.subs))
	for i, s := range c.subs {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// parseFlags parses flags wherever they stand among the positional
// arguments, as users expect ("roles grant EMAIL ROLE -config FILE"); a
// "--" ends the flags, and what follows it is positional even if it looks
// like a flag.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var after []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, after = args[:i], args[i+1:]
	}
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		// Parse stops at the first positional argument: keep it, and
		// parse what follows it.
		if args = fs.Args(); len(args) == 0 {
			return append(rest, after...), nil
		}
		rest, args = append(rest, args[0]), args[1:]
	}
}

func noArgs(name string, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: %s takes no arguments, got %q", errUsage, name, args)
	}
	return nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: authsidecar CMD [SUB] [-config FILE] [ARGS...]\n\nCommands (secret: needs the secret in the environment):")
	for _, c := range commands {
		if c.subs == nil {
			usageLine(w, c.name, c)
		}
		for _, s := range c.subs {
			usageLine(w, c.name+" "+s.name+prefixed(" ", s.args), s)
		}
	}
	fmt.Fprintln(w, "\nRun 'authsidecar CMD [SUB] -h' for a command's flags.")
}

func usageLine(w io.Writer, synopsis string, c command) {
	need := ""
	if c.secret {
		need = "secret"
	}
	fmt.Fprintf(w, "  %-32s %-6s  %s\n", synopsis, need, c.summary)
}

// subUsage is "authsidecar CMD -h" for a command with subcommands.
func subUsage(w io.Writer, c command) {
	fmt.Fprintf(w, "Usage: authsidecar %s SUB [-config FILE] [ARGS...]\n\n%s.\n\nSubcommands (secret: needs the secret in the environment):\n", c.name, upperFirst(c.summary))
	for _, s := range c.subs {
		usageLine(w, c.name+" "+s.name+prefixed(" ", s.args), s)
	}
	fmt.Fprintf(w, "\nRun 'authsidecar %s SUB -h' for a subcommand's flags.\n", c.name)
}

// version, when a packager sets it (-ldflags "-X main.version=..."),
// replaces the module version the build info holds.
var version string

func cmdVersion(_ context.Context, e *cliEnv, args []string) error {
	if err := noArgs("version", args); err != nil {
		return err
	}
	info, _ := buildinfo.Read()
	fmt.Fprint(e.stdout, info.Format("authsidecar", version))
	return nil
}
