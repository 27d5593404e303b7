package main

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// scenarioKey names a scenario on the command line and in the JSON.
type scenarioKey string

const (
	scenBusiness      scenarioKey = "a"          // business GETs, a few hundred tokens
	scenBusinessNoLog scenarioKey = "a-nolog"    // the same, access log off
	scenVerifier      scenarioKey = "a-verifier" // the same, on a verifier-mode sidecar
	scenMix           scenarioKey = "b"          // the mix the protocol expects (mostly business)
	scenNewToken      scenarioKey = "c"          // a never-seen token every request
	scenWebSocket     scenarioKey = "d"          // WebSocket handshakes with ?token=
	scenSession       scenarioKey = "e"          // get-session alone
	scenSignIn        scenarioKey = "f"          // sign-in alone
	scenSessionPG     scenarioKey = "e-pg"       // get-session alone, on PostgreSQL
	scenSignInPG      scenarioKey = "f-pg"       // sign-in alone, on PostgreSQL
	scenRevocations   scenarioKey = "a-rev1m"    // a, with a million revocations held
	scenEffect        scenarioKey = "r"          // revocation time to effect, no load
	scenMemory        scenarioKey = "g"          // 1,000 connections right after sign-ins: memory
	scenMemory64      scenarioKey = "g-64"       // the same with 64 connections
)

// scenarioDef is a scenario's fixed description.
type scenarioDef struct {
	key    scenarioKey
	label  string  // table row
	weight float64 // its run length as a fraction of -duration
	bare   bool    // measured against the bare proxy too
	// floor: measured against the floor too, the bare proxy plus one
	// ed25519.Verify per request (floor.go); with bare.
	floor    bool
	tunnel   bool // every request a new connection
	maxConns int  // cap on -connections (0: none)
	// requests names the scenario whose request stream it sends ("": its
	// own): a-verifier sends a's, e-pg e's, f-pg f's.
	requests scenarioKey
	// verifier: the sidecar runs in mode verifier, with no database and
	// no AUTH_SECRET, its keys fetched from a full sidecar's
	// /api/auth/jwks (kept running beside it).
	verifier bool
	// postgres: the full sidecar runs on PostgreSQL, with users signed up
	// there; skipped (with a note) when there is no PostgreSQL.
	postgres bool
	// revocations: the database holds this many revocations (the
	// sidecar loads them before it serves) while the scenario runs.
	revocations bool
	// effect: no load; the time a sign-out takes to be refused
	// (revocation.go).
	effect bool
	// memory: each run is on a fresh bare proxy and a fresh sidecar,
	// which first answer a burst of sign-ups and sign-ins; the load, on
	// conns connections, starts as soon as the last one is answered, and
	// the peak RSS is the load's (memory.go).
	memory bool
	conns  int // fixed number of connections (0: -connections)
}

// stream is the scenario whose requests d sends.
func (d scenarioDef) stream() scenarioKey {
	if d.requests != "" {
		return d.requests
	}
	return d.key
}

// signInConns caps scenario f's connections: the sidecar runs GOMAXPROCS
// scrypt hashes at once and answers 503 to a request still queued after 5
// s, so more connections add only queueing (and, past that, errors).
const signInConns = 4

// scenarioDefs, in the order they run. The PostgreSQL ones come last, so
// that the server (started before the first of them) is not running while
// the others are measured.
var scenarioDefs = []scenarioDef{
	{key: scenBusiness, label: "a: business GET", weight: 1, bare: true},
	{key: scenBusinessNoLog, label: "a': business GET, access log off", weight: 1, bare: true},
	{key: scenVerifier, label: "a-verifier: business GET, verifier mode (keys from a full sidecar's JWKS, no database)", weight: 1, bare: true,
		requests: scenBusiness, verifier: true},
	{key: scenMix, label: "b: mix (95% business, 4.9% get-session, 0.1% sign-in)", weight: 0.75, bare: true},
	{key: scenNewToken, label: "c: business GET, a new JWT every request", weight: 0.75, bare: true, floor: true},
	{key: scenWebSocket, label: "d: WebSocket handshake, ?token=", weight: 0.5, bare: true, tunnel: true},
	{key: scenSession, label: "e: get-session alone (no baseline)", weight: 0.5},
	{key: scenSignIn, label: "f: sign-in alone, scrypt (no baseline)", weight: 0.5, maxConns: signInConns},
	{key: scenRevocations, label: "a-rev1m: business GET, 1,000,000 revocations held", weight: 1, bare: true, requests: scenBusiness, revocations: true},
	{key: scenEffect, label: "r: revocation time to effect: sign-out to 401 on the same sidecar and on a verifier (no load)", effect: true},
	{key: scenMemory64, label: "g-64: business GET on 64 connections right after 10 sign-ups + 10 sign-ins (fresh processes)", weight: 4, bare: true,
		requests: scenBusiness, memory: true, conns: 64},
	{key: scenMemory, label: "g: business GET on 1,000 connections right after 10 sign-ups + 10 sign-ins (fresh processes)", weight: 4, bare: true,
		requests: scenBusiness, memory: true, conns: 1000},
	{key: scenSessionPG, label: "e-pg: get-session alone, PostgreSQL (no baseline)", weight: 0.5, requests: scenSession, postgres: true},
	{key: scenSignInPG, label: "f-pg: sign-in alone, scrypt, PostgreSQL (no baseline)", weight: 0.5, maxConns: signInConns,
		requests: scenSignIn, postgres: true},
}

func allScenarioKeys() []string {
	keys := make([]string, len(scenarioDefs))
	for i, d := range scenarioDefs {
		keys[i] = string(d.key)
	}
	return keys
}

func scenarioByKey(k scenarioKey) scenarioDef {
	for _, d := range scenarioDefs {
		if d.key == k {
			return d
		}
	}
	panic("unknown scenario " + string(k))
}

// parseScenarios reads "all" or a comma-separated list; the result keeps
// the canonical order.
func parseScenarios(s string) ([]scenarioKey, error) {
	if strings.TrimSpace(s) == "all" {
		s = strings.Join(allScenarioKeys(), ",")
	}
	want := map[scenarioKey]bool{}
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "a'" {
			f = string(scenBusinessNoLog)
		}
		if !slices.Contains(allScenarioKeys(), f) {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", f, strings.Join(allScenarioKeys(), ","))
		}
		want[scenarioKey(f)] = true
	}
	var keys []scenarioKey
	for _, d := range scenarioDefs {
		if want[d.key] {
			keys = append(keys, d.key)
		}
	}
	return keys, nil
}

// fixtures are the credentials the generators draw from: one set for the
// SQLite database, one for PostgreSQL's (cookies and users only).
type fixtures struct {
	jwts     []string // -tokens distinct JWTs (scenarios a, a-nolog, a-verifier, b, d)
	cookies  []string // their session cookies, "name=value" (b, e, e-pg)
	signIns  int      // sign-ins use user<i>@example.com, i in [0, signIns)
	password string   // every user's password
	pool     *tokenPool
}

// tokenPool hands out scenario c's fresh JWTs, each once; when it runs
// out it starts over, and reused says how often that happened.
type tokenPool struct {
	tokens []string
	taken  atomic.Uint64
}

func (p *tokenPool) take() string {
	i := p.taken.Add(1) - 1
	return p.tokens[i%uint64(len(p.tokens))]
}

// reused is how many handed-out tokens had been handed out before.
func (p *tokenPool) reused() uint64 {
	n := p.taken.Load()
	return n - min(n, uint64(len(p.tokens)))
}

// generatorFor returns the request stream of scenario k for a target
// whose address is host. sidecar is false for the bare proxy and the
// floor, which get byte-for-byte the same requests except where noted.
func (f *fixtures) generatorFor(k scenarioKey, host string, sidecar bool) generator {
	business := func(w *worker) kind {
		w.req = appendBusiness(w.req, host, f.jwts[w.intn(len(f.jwts))])
		return kindBusiness
	}
	session := func(w *worker) kind {
		w.req = appendSession(w.req, host, f.cookies[w.intn(len(f.cookies))])
		return kindSession
	}
	signIn := func(w *worker) kind {
		w.req = appendSignIn(w.req, host, w.intn(f.signIns), f.password)
		return kindSignIn
	}
	switch k {
	case scenBusiness, scenBusinessNoLog, scenRevocations:
		return business
	case scenMix:
		return func(w *worker) kind {
			switch r := w.intn(1000); {
			case r < 1:
				return signIn(w)
			case r < 50:
				return session(w)
			default:
				return business(w)
			}
		}
	case scenNewToken:
		if !sidecar {
			// The bare proxy verifies nothing, and the floor caches
			// nothing (a token sent before costs it a full verification
			// again): the same sizes of token, without using up the pool.
			return func(w *worker) kind {
				t := f.pool.tokens[w.intn(len(f.pool.tokens))]
				w.req = appendBusiness(w.req, host, t)
				return kindBusiness
			}
		}
		return func(w *worker) kind {
			w.req = appendBusiness(w.req, host, f.pool.take())
			return kindBusiness
		}
	case scenWebSocket:
		return func(w *worker) kind {
			jwt := ""
			if sidecar { // the bare proxy: the same path without a token
				jwt = f.jwts[w.intn(len(f.jwts))]
			}
			w.req = appendUpgrade(w.req, host, jwt)
			return kindUpgrade
		}
	case scenSession:
		return session
	case scenSignIn:
		return signIn
	}
	panic("no generator for scenario " + string(k))
}
