//go:build linux

package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"
	"unsafe"

	"github.com/authsidecar/authsidecar/internal/pgcluster"
	"github.com/authsidecar/authsidecar/webclient"
)

// The README promises that every command in it works. TestReadmeCommands
// runs every ```sh block of README.md, in order, in one bash, as a newcomer
// pasting them would, and checks what each printed. The commands name fixed
// ports (8080, 9090, 3000, 5432, 8081-8083, ...), so they run in a network
// namespace of their own (a child process of this test binary, see
// readmeHelper), where those ports are free and where "your app" and
// PostgreSQL are provided at the addresses the README assumes.

// readmeStep is what the test knows about one runnable README block,
// identified by its first line (a block whose first line changes must be
// looked at again here).
type readmeStep struct {
	first string
	// name, for a block that starts a server the README runs in a terminal
	// of its own: the test's shell stops it with "stop_background name".
	name string
	// another: the README runs the block "in another shell", which has none
	// of the first shell's AUTH_SECRET and DATABASE_URL.
	another bool
	// postgres: the block needs the PostgreSQL of the README's DATABASE_URL.
	postgres bool
	// before and after are the test's own shell, run around the block: what
	// the README has the reader do in prose (stop the old sidecar), and
	// waiting for the servers the block started.
	before, after string
	// want: regexps the block's output (stdout and stderr, the logs of the
	// servers it started included) must match, in this order.
	want []string
	// wantAfter: the same for the output of after.
	wantAfter []string
}

const (
	userID = `"x_user_id": "[A-Za-z0-9]{8,}"`
	noUser = `"x_user_id": ""`
)

var readmeSteps = []readmeStep{{
	first: "go run ./cmd/authsidecar demo",
	name:  "demo",
	// The demo prints a walkthrough to paste into another shell: run it,
	// then stop the demo as the reader does (Ctrl-C), freeing 8080.
	after: `wait_output 'running on http://'
sed -n '/^  S=/,/^Press Ctrl-C/p' "$OUT/$BLOCK.out" | grep -v '^Press' | sed 's/^  //' > "$OUT/walkthrough.sh"
(set +eE; unset AUTH_SECRET DATABASE_URL; . "$OUT/walkthrough.sh") # pasted by hand: no errexit
stop_background demo`,
	want: []string{`running on http://127\.0\.0\.1:8080`, `DEVELOPMENT USE ONLY`, `msg=stopped`},
	wantAfter: []string{
		`"email":"ann@example.com"`, // sign-up
		`"redirect":false`,          // sign-in
		`"sub":"[A-Za-z0-9]+"`,      // the decoded JWT payload
		`"path": "/api/tasks",\s*` + userID,
		`HTTP/1.1 401 Unauthorized`,
	},
}, {
	first: `export AUTH_SECRET="$(openssl rand -base64 32)"   # keep it: changing it signs everyone out`,
	name:  "serve",
	after: `wait_http http://127.0.0.1:9090/readyz`,
	want: []string{
		`ok +config sidecar\.yaml`, `ok +secret from \$AUTH_SECRET`,
		`ok +database authsidecar\.db does not exist yet: serve creates it`,
		`all checks passed`, `"msg":"listening"`,
	},
}, {
	first:   `S=http://localhost:8080; B=$S/api/auth`,
	another: true,
	want: []string{
		`"email":"ann@example.com"`, `"redirect":false`,
		`"path": "/api/tasks",\s*` + userID,
		`\{"message":"Unauthorized","code":"UNAUTHORIZED"\}`,
	},
}, {
	first:   `curl -s $S/api/auth/jwks                                          # auth`,
	another: true,
	want: []string{
		`\{"keys":\[\{"`,
		`"path": "/api/mcp-oauth/authorize",\s*` + userID,
		`"path": "/ws/browser",\s*` + noUser,
		`HTTP/1.1 101 Switching Protocols`,
		`"code":"FORBIDDEN"`,
		`"path": "/api/tasks",\s*` + userID,
		`"path": "/index.html",\s*` + noUser,
	},
}, {
	first:   `go run ./cmd/authsidecar users list`,
	another: true,
	want: []string{
		`ann@example\.com +Ann `,
		`granted role admin to ann@example\.com`,
		`"path": "/api/admin/users",\s*` + userID,
		`backed up authsidecar\.db to auth-\d{4}-\d\d-\d\d\.db`,
	},
}, {
	first:    `export DATABASE_URL='postgres://authsidecar:PASSWORD@127.0.0.1:5432/authsidecar?sslmode=disable'`,
	postgres: true,
	before:   `stop_background serve # "Stop the SQLite sidecar first"`,
	want:     []string{`copied authsidecar\.db to .*: 1 user, 1 account, \d+ sessions?, 1 signing key, 1 role`},
}, {
	first:    `go build -o authsidecar ./cmd/authsidecar`,
	postgres: true,
	after: `wait_http http://127.0.0.1:9091/readyz
wait_http http://127.0.0.1:9092/readyz
wait_http http://127.0.0.1:9093/readyz`,
	// The key copied from SQLite decrypts: the same AUTH_SECRET was kept.
	want: []string{`ok +config replica1\.yaml`, `ok +key \S+ created`, `all checks passed`},
}, {
	first:    `R1=http://127.0.0.1:8081 R2=http://127.0.0.1:8082 R3=http://127.0.0.1:8083`,
	another:  true,
	postgres: true,
	want: []string{
		`"email":"bea@example.com"`, `"redirect":false`,
		`"path": "/api/tasks",\s*` + userID,
		`\{"success":true\}\s*null`, // sign-out, then get-session on another replica
	},
}, {
	first:    `cat > verifier.yaml <<'EOF'`,
	postgres: true,
	after:    `wait_http http://127.0.0.1:9190/readyz`,
	want: []string{
		`ok +no database \(verifier mode\)`,
		`ok +jwks http://127\.0\.0\.1:8081/api/auth/jwks \(1 Ed25519 key; iss and aud http://localhost:8080\)`,
		`all checks passed`,
	},
}, {
	first:    `curl -s -H "Authorization: Bearer $JWT" http://127.0.0.1:8090/api/tasks    # to :4000 with X-User-Id`,
	another:  true,
	postgres: true,
	want: []string{
		`"upstream": "the second service",\s*"method": "GET",\s*"path": "/api/tasks",\s*` + userID,
		`"code":"NOT_FOUND"`,
	},
}}

// readmeNotRun are the blocks the test does not run, by first line, and
// why. Every other block must be in readmeSteps.
var readmeNotRun = map[string]string{
	"go run ./cmd/authsidecar-bench": "the benchmark's full run takes ~200 s on an idle machine; " +
		"cmd/authsidecar-bench TestSmoke runs the same program end to end in -smoke mode",
	"go test -race ./...": "it is the command that runs this test; .ci/run runs exactly it",
}

// readmeBlock is one fenced code block of the README.
type readmeBlock struct {
	info    string // the fence's info string: sh, html, ...
	line    int    // of the opening fence
	heading string // the heading it is under
	body    string
}

// readmeFenceKinds are the fenced blocks that hold no commands. Anything
// else (bash, console, an untagged fence) would be a command the test
// silently skipped.
var readmeFenceKinds = map[string]bool{"sh": true, "html": true, "yaml": true, "json": true}

func readmeBlocks(text string) ([]readmeBlock, error) {
	var blocks []readmeBlock
	var cur *readmeBlock
	heading := ""
	for i, line := range strings.Split(text, "\n") {
		switch {
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.body += line + "\n"
		case strings.HasPrefix(line, "```"):
			info := strings.TrimSpace(strings.TrimPrefix(line, "```"))
			if !readmeFenceKinds[info] {
				return nil, fmt.Errorf("README.md:%d: a fenced block tagged %q: commands go in ```sh blocks, which the test runs", i+1, info)
			}
			cur = &readmeBlock{info: info, line: i + 1, heading: heading}
		case strings.HasPrefix(line, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("README.md:%d: the fenced block is not closed", cur.line)
	}
	return blocks, nil
}

func (b readmeBlock) first() string {
	line, _, _ := strings.Cut(b.body, "\n")
	return strings.TrimSpace(line)
}

// readmeForeground matches a server the README runs in a terminal of its
// own (no "&"): the script runs it in the background.
var readmeForeground = regexp.MustCompile(`^go run \./cmd/authsidecar (serve|demo)\b[^&#]*?(\s*#.*)?$`)

// readmeScript is the bash that runs the README's steps in order, each
// block's output in $OUT/<n>.out and its after's in $OUT/<n>.after.
func readmeScript(t *testing.T, blocks []readmeBlock) (script string, run map[int]readmeStep) {
	t.Helper()
	steps := map[string]readmeStep{}
	for _, s := range readmeSteps {
		steps[s.first] = s
	}
	run = map[int]readmeStep{}
	var sb strings.Builder
	sb.WriteString(readmePrelude)
	n := 0
	seen := map[string]bool{}
	for _, b := range blocks {
		if b.info != "sh" {
			continue
		}
		n++
		first := b.first()
		if seen[first] {
			t.Errorf("README.md:%d: another sh block starts with %q too: the test tells blocks apart by their first line", b.line, first)
		}
		seen[first] = true
		if _, ok := readmeNotRun[first]; ok {
			continue
		}
		s, ok := steps[first]
		if !ok {
			t.Errorf("README.md:%d (under %q): the sh block starting %q is neither run by this test (readmeSteps) nor listed with a reason (readmeNotRun)", b.line, b.heading, first)
			continue
		}
		run[n] = s
		var body strings.Builder
		for _, line := range strings.SplitAfter(b.body, "\n") {
			if m := readmeForeground.FindStringSubmatchIndex(strings.TrimRight(line, "\n")); m != nil {
				cmd := strings.TrimRight(line, "\n")
				if m[4] >= 0 {
					cmd = cmd[:m[4]]
				}
				if s.name == "" {
					t.Errorf("README.md:%d: the block runs a server in the foreground: give its step a name", b.line)
				}
				line = fmt.Sprintf("%s & BACKGROUND_%s+=($!)\n", cmd, s.name)
			}
			body.WriteString(line)
		}
		guard := ""
		if s.postgres {
			guard = `if [ ! -e "$OUT/postgres-unavailable" ]; then`
			sb.WriteString(guard + "\n")
		}
		fmt.Fprintf(&sb, "BLOCK=%d; echo $BLOCK > \"$OUT/current\"\n", n)
		if s.another {
			sb.WriteString("another_shell\n")
		}
		if s.before != "" {
			sb.WriteString(s.before + "\n")
		}
		fmt.Fprintf(&sb, "{\n%s} > \"$OUT/%d.out\" 2>&1\n", body.String(), n)
		if s.another {
			sb.WriteString("first_shell\n")
		}
		if s.after != "" {
			fmt.Fprintf(&sb, "{\n%s\n} > \"$OUT/%d.after\" 2>&1\n", s.after, n)
		}
		if guard != "" {
			sb.WriteString("fi\n")
		}
	}
	sb.WriteString("echo done > \"$OUT/current\"\n")
	for _, s := range readmeSteps {
		if !seen[s.first] {
			t.Errorf("readmeSteps has a step for %q, which no sh block of the README starts with", s.first)
		}
	}
	for first := range readmeNotRun {
		if !seen[first] {
			t.Errorf("readmeNotRun lists %q, which no sh block of the README starts with", first)
		}
	}
	return sb.String(), run
}

// readmePrelude is the test's own shell: bounded waits, the second shell,
// and Ctrl-C for the servers the README runs in their own terminal.
const readmePrelude = `set -eE
trap 'echo "exit $? at: $BASH_COMMAND" > "$OUT/error"' ERR
cd "$WORK"

wait_http() { # the URL answers 2xx
  for _ in $(seq 300); do
    if curl -sf -o /dev/null --max-time 1 "$1"; then return 0; fi
    sleep 0.1
  done
  echo "readme test: $1 did not answer within 30 s" >&2; return 1
}
wait_output() { # the current block's output matches $1
  for _ in $(seq 300); do
    if grep -q "$1" "$OUT/$BLOCK.out"; then return 0; fi
    sleep 0.1
  done
  echo "readme test: no '$1' in block $BLOCK's output within 30 s" >&2; return 1
}
stop_background() { # Ctrl-C, as the reader would, to the servers of step $1
  local pids="BACKGROUND_$1[@]"
  for pid in "${!pids}"; do
    kill -INT "$pid"
    wait "$pid" || { echo "readme test: $1 ($pid) exited $? after Ctrl-C" >&2; return 1; }
  done
}
another_shell() {
  FIRST_SECRET=${AUTH_SECRET-}; FIRST_URL=${DATABASE_URL-}
  unset AUTH_SECRET DATABASE_URL
}
first_shell() {
  if [ -n "$FIRST_SECRET" ]; then export AUTH_SECRET="$FIRST_SECRET"; fi
  if [ -n "$FIRST_URL" ]; then export DATABASE_URL="$FIRST_URL"; fi
}
`

// goShim is "go" as the README uses it, on the binary the test built.
const goShim = `#!/bin/bash
if [ "$1" = run ] && [ "$2" = ./cmd/authsidecar ]; then shift 2; exec "$AUTHSIDECAR_BIN" "$@"; fi
if [ "$#" = 4 ] && [ "$1" = build ] && [ "$2" = -o ] && [ "$4" = ./cmd/authsidecar ]; then exec cp "$AUTHSIDECAR_BIN" "$3"; fi
echo "readme test: 'go $*' is not a command this test runs: run it in readmeSteps or list it in readmeNotRun" >&2
exit 127
`

func TestReadmeCommands(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			readmeUnavailable(t, tool+" is needed to run the README's commands")
		}
	}
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := readmeBlocks(string(text))
	if err != nil {
		t.Fatal(err)
	}
	script, steps := readmeScript(t, blocks)
	if t.Failed() {
		t.FailNow()
	}

	bin := sidecarBinary(t)
	root := t.TempDir()
	work, out, shim := filepath.Join(root, "repo"), filepath.Join(root, "out"), filepath.Join(root, "bin")
	for _, d := range []string{work, out, shim} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	yaml, err := os.ReadFile("../../sidecar.yaml")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(work, "sidecar.yaml"), string(yaml))
	writeFile(t, filepath.Join(root, "readme.sh"), script)
	if err := os.WriteFile(filepath.Join(shim, "go"), []byte(goShim), 0o755); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0])
	if exe, err := os.Executable(); err == nil {
		cmd = exec.Command(exe)
	}
	cmd.Env = append(testEnv(), readmeHelperEnv+"=1", "HOME="+root, "WORK="+work, "OUT="+out,
		"AUTHSIDECAR_BIN="+bin, "README_SCRIPT="+filepath.Join(root, "readme.sh"),
		"PATH="+shim+string(os.PathListSeparator)+os.Getenv("PATH"))
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGTERM}
	if os.Geteuid() != 0 {
		// Unprivileged: a user namespace in which we are root owns the
		// network namespace.
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		readmeUnavailable(t, fmt.Sprintf("a network namespace of its own is needed (the README's commands use fixed ports): %v", err))
	}
	runErr := cmd.Wait()
	t.Logf("README commands ran in %v", time.Since(start).Round(100*time.Millisecond))

	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(out, name))
		return string(b)
	}
	if runErr != nil {
		cur := strings.TrimSpace(read("current"))
		t.Fatalf("the README's commands failed (%v) in sh block %s: %s\nits output:\n%s\nafter it:\n%s\nhelper:\n%s",
			runErr, cur, read("error"), tail(read(cur+".out"), 4000), tail(read(cur+".after"), 2000), tail(log.String(), 2000))
	}
	if cur := strings.TrimSpace(read("current")); cur != "done" {
		t.Fatalf("the README's commands stopped in block %q\n%s", cur, tail(log.String(), 2000))
	}
	pgMissing := read("postgres-unavailable")
	for _, n := range slices.Sorted(maps.Keys(steps)) {
		s := steps[n]
		if s.postgres && pgMissing != "" {
			continue
		}
		checkOutput(t, fmt.Sprintf("sh block %d (%s)", n, s.first), read(fmt.Sprintf("%d.out", n)), s.want)
		checkOutput(t, fmt.Sprintf("sh block %d (%s), after it", n, s.first), read(fmt.Sprintf("%d.after", n)), s.wantAfter)
	}
	if pgMissing != "" {
		readmeUnavailable(t, "the README's PostgreSQL blocks were not run: "+pgMissing)
	}
}

// checkOutput reports the first of want that does not match out after the
// previous one's match.
func checkOutput(t *testing.T, what, out string, want []string) {
	t.Helper()
	rest := out
	for _, w := range want {
		loc := regexp.MustCompile(w).FindStringIndex(rest)
		if loc == nil {
			t.Errorf("%s: no match for %s in what follows the previous match:\n%s\n\nwhole output:\n%s", what, w, tail(rest, 2000), tail(out, 4000))
			return
		}
		rest = rest[loc[1]:]
	}
}

// readmeUnavailable skips, or fails under CI, as internal/pgtest does.
func readmeUnavailable(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

const readmeHelperEnv = "AUTHSIDECAR_README_HELPER"

// The test binary run with readmeHelperEnv set is the helper, in the new
// network namespace: it never reaches TestMain.
func init() {
	if os.Getenv(readmeHelperEnv) == "1" {
		os.Exit(readmeHelper())
	}
}

// readmeHelper brings the namespace's loopback up, starts what the README
// assumes is there (your app on 127.0.0.1:3000, a second service on :4000,
// PostgreSQL on :5432 with the README's role and database), runs the script
// in bash, and then stops everything the script started.
func readmeHelper() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "readme helper: "+format+"\n", args...)
		return 2
	}
	if err := loopbackUp(); err != nil {
		return fail("loopback up: %v", err)
	}
	for addr, h := range map[string]http.Handler{
		"127.0.0.1:3000": readmeApp(),
		"127.0.0.1:4000": webclient.Echo("the second service"),
	} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fail("%v", err)
		}
		go (&http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}).Serve(ln)
	}
	out := os.Getenv("OUT")
	pg, err := readmePostgres()
	if err != nil {
		os.WriteFile(filepath.Join(out, "postgres-unavailable"), []byte(err.Error()), 0o644)
	} else {
		defer pg.Close()
	}

	bash := exec.Command("bash", os.Getenv("README_SCRIPT"))
	bash.Stdout, bash.Stderr = os.Stderr, os.Stderr
	// Its own process group: the servers the script started in the
	// background are stopped with it.
	bash.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := bash.Start(); err != nil {
		return fail("bash: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- bash.Wait() }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	code := 0
	select {
	case err := <-done:
		if err != nil {
			code = 1
			fmt.Fprintf(os.Stderr, "readme helper: bash: %v\n", err)
		}
	case <-time.After(150 * time.Second):
		fmt.Fprintln(os.Stderr, "readme helper: the README's commands did not finish within 150 s")
		code = 1
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "readme helper: %v\n", s)
		code = 1
	}
	stopGroup(bash.Process.Pid)
	return code
}

// stopGroup stops a process group as a reader closing their terminals
// would: SIGTERM (the sidecars drain), SIGKILL after 30 s.
func stopGroup(pgid int) {
	syscall.Kill(-pgid, syscall.SIGTERM)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
}

// readmePostgres starts the README's PostgreSQL: 127.0.0.1:5432, role
// authsidecar with password PASSWORD, database authsidecar.
func readmePostgres() (*pgcluster.Cluster, error) {
	c, err := pgcluster.NewOnPort(5432)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("pgx", c.AdminURL())
	if err == nil {
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The cluster's superuser is already named authsidecar.
		if _, err = db.ExecContext(ctx, `CREATE DATABASE authsidecar`); err == nil {
			_, err = db.ExecContext(ctx, `ALTER ROLE authsidecar PASSWORD 'PASSWORD'`)
		}
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("the README's database: %w", err)
	}
	return c, nil
}

// readmeApp is "your app": the demo's echo, and its WebSocket echo on the
// route the README opens a WebSocket on.
func readmeApp() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/ws/chat", webclient.EchoWebSocket())
	mux.Handle("/", webclient.Echo("authsidecar demo echo"))
	return mux
}

// loopbackUp sets IFF_UP on lo: a new network namespace starts with its
// loopback down. (ip link set lo up, without needing iproute2.)
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var ifr [40]byte // struct ifreq: the name, then the flags (a short)
	copy(ifr[:], "lo")
	ioctl := func(req uintptr) error {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(&ifr[0]))); errno != 0 {
			return errno
		}
		return nil
	}
	if err := ioctl(syscall.SIOCGIFFLAGS); err != nil {
		return err
	}
	binary.NativeEndian.PutUint16(ifr[16:], binary.NativeEndian.Uint16(ifr[16:])|syscall.IFF_UP)
	return ioctl(syscall.SIOCSIFFLAGS)
}

// TestReadmeLinks checks that every link of the README and of docs/ to a
// heading ("#anchor", "file.md#anchor") names one, and every relative link
// names a file of the repository.
func TestReadmeLinks(t *testing.T) {
	docs, _ := filepath.Glob("../../docs/*.md")
	for _, file := range append([]string{"../../README.md"}, docs...) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(text)) {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link to %s: no such file", file, l.line, target)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			destText, err := os.ReadFile(dest)
			if err != nil {
				t.Errorf("%s:%d: link to %s: %v", file, l.line, target, err)
				continue
			}
			if !markdownAnchors(string(destText))[anchor] {
				t.Errorf("%s:%d: link to %s: no heading has the anchor %q", file, l.line, target, anchor)
			}
		}
	}
}

type markdownLink struct {
	line   int
	target string
}

var markdownLinkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// markdownLinks are the inline links outside fenced blocks.
func markdownLinks(text string) []markdownLink {
	var links []markdownLink
	fenced := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range markdownLinkRE.FindAllStringSubmatch(line, -1) {
			links = append(links, markdownLink{n, m[1]})
		}
	}
	return links
}

// markdownAnchors are the anchors GitHub gives the headings: lower case,
// punctuation other than "-" and "_" dropped, spaces as "-", and "-1",
// "-2", ... after a repeated one.
func markdownAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	count := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := count[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		count[a]++
	}
	return anchors
}

// TestReadmeTestCommandInCI: the README's test command is not run by the
// README test (it is what runs it); CI must run exactly it.
func TestReadmeTestCommandInCI(t *testing.T) {
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := readmeBlocks(string(text))
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range blocks {
		if b.info != "sh" || !strings.HasPrefix(b.first(), "go test ") {
			continue
		}
		found = true
		if !slices.Contains(strings.Split(string(ci), "\n"), b.first()) {
			t.Errorf("README.md:%d gives %q as the test command; .ci/run has no line running exactly it", b.line, b.first())
		}
	}
	if !found {
		t.Error("README.md gives no test command (an sh block starting with go test)")
	}
}
