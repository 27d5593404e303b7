//go:build linux

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/authsidecar/authsidecar/internal/pgcluster"
	"github.com/authsidecar/authsidecar/webclient"
)

// The docs promise that every command in them works. TestReadmeCommands
// runs every ```sh block of README.md and docs/*.md, file after file in
// readmeFiles' order and block after block, in one bash, as a newcomer
// pasting them would, and checks what each printed.
//
// The commands name fixed ports (8080, 9090, 3000, 5432, 8081-8083, ...),
// which other programs on this machine may hold. So the test maps each
// port the docs use (readmePorts) to a free one and writes that port
// wherever the docs wrote the fixed one: in the blocks, in its copy of
// sidecar.yaml, and in what it expects them to print. It needs no network
// namespace, so no root and no user namespaces. "Your app" (3000), the
// second service (4000) and PostgreSQL (5432) are the test's own servers
// on the mapped ports.

// readmeFiles are the documents whose blocks run, in this order, in one
// shell: later ones build on what earlier ones started (the README's
// sidecar, its $JWT). Every other docs/*.md follows, in name order.
var readmeFiles = []string{"README.md", "docs/configuration.md", "docs/operations.md", "docs/scaling.md"}

// readmePorts are the ports the docs' commands use. A block naming another
// host:port fails the test, so a new port cannot slip through unmapped.
var readmePorts = []int{3000, 4000, 5432, 8080, 8081, 8082, 8083, 8090, 9090, 9091, 9092, 9093, 9190}

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
	// README.md
	first: "go run ./cmd/authsidecar demo",
	name:  "demo",
	// The demo prints a walkthrough to paste into another shell: run it,
	// then stop the demo as the reader does (Ctrl-C). It takes 8080 when
	// free, else any port, and its walkthrough names the one it took.
	after: `wait_output 'running on http://'
sed -n '/^  S=/,/^Press Ctrl-C/p' "$OUT/$BLOCK.out" | grep -v '^Press' | sed 's/^  //' > "$OUT/walkthrough.sh"
(set +eE; unset AUTH_SECRET DATABASE_URL; . "$OUT/walkthrough.sh") # pasted by hand: no errexit
stop_background demo`,
	want: []string{`running on http://127\.0\.0\.1:\d+`, `DEVELOPMENT USE ONLY`, `msg=stopped`},
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
	first: `go build -trimpath -o authsidecar ./cmd/authsidecar`,
	want:  []string{`(?m)^authsidecar \S+\nrevision  .+\n(committed .+\n)?go        go1\.\d+`},
}, {
	// docs/configuration.md
	first:   `curl -s $S/api/auth/jwks                                          # auth`,
	another: true,
	want: []string{
		`\{"keys":\[\{"`,
		`"path": "/api/mcp-oauth/authorize",\s*` + userID,
		`"path": "/ws/browser",\s*` + noUser,
		`HTTP/1.1 101 Switching Protocols`, // the test's app accepts a WebSocket at /ws/chat
		`"code":"FORBIDDEN"`,
		`"path": "/api/tasks",\s*` + userID,
		`"path": "/index.html",\s*` + noUser,
	},
}, {
	// docs/operations.md
	first:   `go run ./cmd/authsidecar users list`,
	another: true,
	want: []string{
		`ann@example\.com +Ann `,
		`granted role admin to ann@example\.com`,
		`"path": "/api/admin/users",\s*` + userID,
		`backed up authsidecar\.db to auth-\d{4}-\d\d-\d\d\.db`,
	},
}, {
	// docs/scaling.md
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
	want: []string{`ok +config replica-8081\.yaml`, `ok +key \S+ created`, `all checks passed`},
}, {
	first:    `R1=http://127.0.0.1:8081 R2=http://127.0.0.1:8082 R3=http://127.0.0.1:8083`,
	another:  true,
	postgres: true,
	want: []string{
		`"email":"bea@example.com"`, `"redirect":false`,
		`"path": "/api/tasks",\s*` + userID,
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
}, {
	first:    `curl -s -b jar -X POST $R2/api/auth/sign-out -H 'Origin: http://localhost:8080'   # a cookie needs its origin: {"success":true}`,
	another:  true,
	postgres: true,
	want: []string{
		`\{"success":true\}\s*null`, // sign-out, then get-session on another replica
		// The JWT revoked on a replica and on the verifier.
		`"code":"UNAUTHORIZED"`, `"code":"UNAUTHORIZED"`,
	},
}}

// readmeNotRun are the blocks the test does not run, by their first line
// or its first words (a command and its arguments, before a space), and
// why. Every other block must be in readmeSteps.
var readmeNotRun = map[string]string{
	"go run ./cmd/authsidecar-image": "cmd/authsidecar-image TestImage builds the image as this command does " +
		"(twice, and runs the binary from it), and .ci/run runs exactly this command",
	readmeTestCommand: "it is the command that runs this test; .ci/run runs exactly it (TestReadmeTestCommandInCI)",
	"go run ./cmd/authsidecar-bench": "the benchmark's full run takes ~200 s on an idle machine and seeding 1M users a minute more; " +
		"cmd/authsidecar-bench TestSmoke runs the same program end to end in -smoke mode",
	"go test -run TestSweepUnderLoad": "sweeping a million expired sessions under load takes ~4 minutes for both stores; " +
		"go test ./sqlstore (CI) runs the same test at its smaller scale",
}

// notRun returns the readmeNotRun entry the block starting with first
// matches, if any.
func notRun(first string) (key string, ok bool) {
	for k := range readmeNotRun {
		if first == k || strings.HasPrefix(first, k+" ") {
			return k, true
		}
	}
	return "", false
}

// readmeBlock is one fenced code block of a document.
type readmeBlock struct {
	file    string // README.md, docs/scaling.md, ...
	info    string // the fence's info string: sh, html, ...
	line    int    // of the opening fence
	heading string // the heading it is under
	body    string
}

func (b readmeBlock) where() string {
	return fmt.Sprintf("%s:%d (under %q)", b.file, b.line, b.heading)
}

// readmeFenceKinds are the fenced blocks that hold no commands. Anything
// else (bash, console, an untagged fence) would be a command the test
// silently skipped.
var readmeFenceKinds = map[string]bool{"sh": true, "html": true, "yaml": true, "json": true, "text": true}

func readmeBlocks(file, text string) ([]readmeBlock, error) {
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
				return nil, fmt.Errorf("%s:%d: a fenced block tagged %q: commands go in ```sh blocks, which the test runs; a picture or a listing in ```text", file, i+1, info)
			}
			cur = &readmeBlock{file: file, info: info, line: i + 1, heading: heading}
		case strings.HasPrefix(line, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the fenced block is not closed", file, cur.line)
	}
	return blocks, nil
}

// docBlocks are the blocks of every document, in readmeFiles' order, then
// those of the other docs/*.md.
func docBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	files := slices.Clone(readmeFiles)
	others, _ := filepath.Glob("../../docs/*.md")
	slices.Sort(others)
	for _, o := range others {
		if f := "docs/" + filepath.Base(o); !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	var blocks []readmeBlock
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := readmeBlocks(f, string(text))
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, b...)
	}
	return blocks
}

func (b readmeBlock) first() string {
	line, _, _ := strings.Cut(b.body, "\n")
	return strings.TrimSpace(line)
}

// portMap maps the docs' ports to the free ones this run uses.
type portMap map[int]int

var portRE = regexp.MustCompile(`\b\d{4}\b`)

// sub writes the mapped port wherever s names one of readmePorts.
func (m portMap) sub(s string) string {
	return portRE.ReplaceAllStringFunc(s, func(p string) string {
		n, _ := strconv.Atoi(p)
		if to, ok := m[n]; ok {
			return strconv.Itoa(to)
		}
		return p
	})
}

var hostPortRE = regexp.MustCompile(`(?:localhost|127\.0\.0\.1):(\d+)`)

// readmeForeground matches a server the docs run in a terminal of its own
// (no "&"): the script runs it in the background.
var readmeForeground = regexp.MustCompile(`^go run \./cmd/authsidecar (serve|demo)\b[^&#]*?(\s*#.*)?$`)

// readmeScript is the bash that runs the docs' steps in order, each
// block's output in $OUT/<n>.out and its after's in $OUT/<n>.after.
func readmeScript(t *testing.T, blocks []readmeBlock, ports portMap) (script string, run map[int]readmeStep) {
	t.Helper()
	steps := map[string]readmeStep{}
	for _, s := range readmeSteps {
		steps[s.first] = s
	}
	run = map[int]readmeStep{}
	var sb strings.Builder
	sb.WriteString(readmePrelude)
	n := 0
	seen := map[string]string{}
	notRunSeen := map[string]bool{}
	for _, b := range blocks {
		if b.info != "sh" {
			continue
		}
		n++
		first := b.first()
		if k, ok := notRun(first); ok {
			notRunSeen[k] = true
			continue
		}
		if where, dup := seen[first]; dup {
			t.Errorf("%s: another sh block (%s) starts with %q too: the test tells blocks apart by their first line", b.where(), where, first)
		}
		seen[first] = b.where()
		s, ok := steps[first]
		if !ok {
			t.Errorf("%s: the sh block starting %q is neither run by this test (readmeSteps in cmd/authsidecar/readme_test.go) nor listed there with a reason (readmeNotRun)", b.where(), first)
			continue
		}
		for _, m := range hostPortRE.FindAllStringSubmatch(b.body, -1) {
			if p, _ := strconv.Atoi(m[1]); !slices.Contains(readmePorts, p) {
				t.Errorf("%s: the block names %s, a port the test does not map to a free one: add %d to readmePorts", b.where(), m[0], p)
			}
		}
		run[n] = s
		var body strings.Builder
		for _, line := range strings.SplitAfter(ports.sub(b.body), "\n") {
			if m := readmeForeground.FindStringSubmatchIndex(strings.TrimRight(line, "\n")); m != nil {
				cmd := strings.TrimRight(line, "\n")
				if m[4] >= 0 {
					cmd = cmd[:m[4]]
				}
				if s.name == "" {
					t.Errorf("%s: the block runs a server in the foreground: give its step a name", b.where())
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
			sb.WriteString(ports.sub(s.before) + "\n")
		}
		fmt.Fprintf(&sb, "{\n%s} > \"$OUT/%d.out\" 2>&1\n", body.String(), n)
		if s.another {
			sb.WriteString("first_shell\n")
		}
		if s.after != "" {
			fmt.Fprintf(&sb, "{\n%s\n} > \"$OUT/%d.after\" 2>&1\n", ports.sub(s.after), n)
		}
		if guard != "" {
			sb.WriteString("fi\n")
		}
	}
	sb.WriteString("echo done > \"$OUT/current\"\n")
	for _, s := range readmeSteps {
		if _, ok := seen[s.first]; !ok {
			t.Errorf("readmeSteps has a step for %q, which no sh block of README.md or docs/ starts with", s.first)
		}
	}
	for k := range readmeNotRun {
		if !notRunSeen[k] {
			t.Errorf("readmeNotRun lists %q, which no sh block of README.md or docs/ starts with", k)
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
all="$*"
if [ "$1" = run ] && [ "$2" = ./cmd/authsidecar ]; then shift 2; exec "$AUTHSIDECAR_BIN" "$@"; fi
if [ "$1" = build ]; then # go build [-trimpath] -o FILE ./cmd/authsidecar
  shift; out=
  while [ "$#" -gt 1 ]; do case "$1" in -trimpath) shift ;; -o) out=$2; shift 2 ;; *) break ;; esac; done
  if [ -n "$out" ] && [ "$#" = 1 ] && [ "$1" = ./cmd/authsidecar ]; then exec cp "$AUTHSIDECAR_BIN" "$out"; fi
fi
echo "readme test: 'go $all' is not a command this test runs: run it in readmeSteps or list it in readmeNotRun" >&2
exit 127
`

func TestReadmeCommands(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			readmeUnavailable(t, tool+" is needed to run the README's commands")
		}
	}
	blocks := docBlocks(t)
	root := t.TempDir()
	work, out, shim := filepath.Join(root, "repo"), filepath.Join(root, "out"), filepath.Join(root, "bin")
	for _, d := range []string{work, out, shim} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// What the docs assume is there: your app, a second service, and a
	// PostgreSQL whose role and database match their DATABASE_URL.
	ports := portMap{}
	for port, h := range map[int]http.Handler{3000: readmeApp(), 4000: webclient.Echo("the second service")} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		ports[port] = ln.Addr().(*net.TCPAddr).Port
	}
	if pg, err := readmePostgres(); err != nil {
		writeFile(t, filepath.Join(out, "postgres-unavailable"), err.Error())
	} else {
		t.Cleanup(pg.Close)
		ports[5432] = pg.Port()
	}
	for _, p := range readmePorts {
		if _, ok := ports[p]; !ok {
			ports[p] = freeReadmePort(t, ports)
		}
	}
	t.Logf("the docs' ports, mapped to free ones: %v", ports)

	script, steps := readmeScript(t, blocks, ports)
	if t.Failed() {
		t.FailNow()
	}
	bin := sidecarBinary(t)
	yaml, err := os.ReadFile("../../sidecar.yaml")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(work, "sidecar.yaml"), ports.sub(string(yaml)))
	writeFile(t, filepath.Join(root, "readme.sh"), script)
	if err := os.WriteFile(filepath.Join(shim, "go"), []byte(goShim), 0o755); err != nil {
		t.Fatal(err)
	}

	bash := exec.Command("bash", filepath.Join(root, "readme.sh"))
	bash.Env = append(testEnv(), "HOME="+root, "WORK="+work, "OUT="+out, "AUTHSIDECAR_BIN="+bin,
		"PATH="+shim+string(os.PathListSeparator)+os.Getenv("PATH"))
	var log syncBuffer
	bash.Stdout, bash.Stderr = &log, &log
	// Its own process group: the servers the script started in the
	// background are stopped with it.
	bash.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := bash.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- bash.Wait() }()
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(240 * time.Second):
		runErr = errors.New("the docs' commands did not finish within 240 s")
	}
	stopGroup(bash.Process.Pid)
	t.Logf("the docs' commands ran in %v", time.Since(start).Round(100*time.Millisecond))

	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(out, name))
		return string(b)
	}
	if runErr != nil {
		cur := strings.TrimSpace(read("current"))
		t.Fatalf("the docs' commands failed (%v) in sh block %s: %s\nits output:\n%s\nafter it:\n%s\nbash:\n%s",
			runErr, cur, read("error"), tail(read(cur+".out"), 4000), tail(read(cur+".after"), 2000), tail(log.String(), 2000))
	}
	if cur := strings.TrimSpace(read("current")); cur != "done" {
		t.Fatalf("the docs' commands stopped in block %q\n%s", cur, tail(log.String(), 2000))
	}
	pgMissing := read("postgres-unavailable")
	for _, n := range slices.Sorted(maps.Keys(steps)) {
		s := steps[n]
		if s.postgres && pgMissing != "" {
			continue
		}
		want, wantAfter := make([]string, len(s.want)), make([]string, len(s.wantAfter))
		for i, w := range s.want {
			want[i] = ports.sub(w)
		}
		for i, w := range s.wantAfter {
			wantAfter[i] = ports.sub(w)
		}
		checkOutput(t, fmt.Sprintf("sh block %d (%s)", n, s.first), read(fmt.Sprintf("%d.out", n)), want)
		checkOutput(t, fmt.Sprintf("sh block %d (%s), after it", n, s.first), read(fmt.Sprintf("%d.after", n)), wantAfter)
	}
	if pgMissing != "" {
		readmeUnavailable(t, "the docs' PostgreSQL blocks were not run: "+pgMissing)
	}
}

// freeReadmePort is a loopback port free now and not already in m, taken
// below Linux's ephemeral range (32768-60999): a server that binds port 0
// meanwhile (the demo's own listeners, another test) is never given it.
// A program binding it by number could still take it first; then the
// test fails naming the address in use.
func freeReadmePort(t *testing.T, m portMap) int {
	t.Helper()
	taken := slices.Collect(maps.Values(m))
	for range 1000 {
		p := 20000 + mathrand.IntN(12000)
		if slices.Contains(taken, p) {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		ln.Close()
		return p
	}
	t.Fatal("no free port between 20000 and 32000")
	return 0
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

// readmePostgres starts the docs' PostgreSQL on a free port: role
// authsidecar with password PASSWORD, database authsidecar.
func readmePostgres() (*pgcluster.Cluster, error) {
	c, err := pgcluster.New()
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
		return nil, fmt.Errorf("the docs' database: %w", err)
	}
	return c, nil
}

// readmeApp is "your app": the demo's echo, and its WebSocket echo on the
// route the docs open a WebSocket on.
func readmeApp() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/ws/chat", webclient.EchoWebSocket())
	mux.Handle("/", webclient.Echo("authsidecar demo echo"))
	return mux
}
