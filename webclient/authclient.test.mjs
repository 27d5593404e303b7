// Unit tests of authclient.js logic that needs no browser: `node --test webclient/`.
// fetch, localStorage and WebSocket are browser objects Node lacks (or that
// would need a server); a scripted fetch and a Map-backed storage stand in.
// The real thing runs in Chromium in cmd/authsidecar/browser_test.go.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createAuthClient, AuthError } from "./authclient.js";

const BASE = "http://localhost:8080";
const JWT = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ1MSJ9.c2ln";
const SESSION = { session: { id: "s1", userId: "u1" }, user: { id: "u1", email: "ann@example.com" } };

function memoryStorage(initial = {}) {
  const m = new Map(Object.entries(initial));
  return {
    map: m,
    getItem: (k) => (m.has(k) ? m.get(k) : null),
    setItem: (k, v) => m.set(k, String(v)),
    removeItem: (k) => m.delete(k),
  };
}

// scriptedFetch answers each call with the next route handler matching
// "METHOD /path", records every call, and fails on an unexpected one.
function scriptedFetch(routes) {
  const calls = [];
  const fetch = async (url, init = {}) => {
    const method = init.method ?? "GET";
    const path = url.slice(BASE.length);
    const call = { url, path, method, init, headers: new Headers(init.headers) };
    calls.push(call);
    const queue = routes[`${method} ${path}`];
    if (!queue?.length) throw new Error(`unexpected ${method} ${path}`);
    return queue.shift()(call);
  };
  return { fetch, calls };
}

const json = (status, body, headers = {}) =>
  new Response(body === undefined ? "" : JSON.stringify(body), {
    status, headers: { "content-type": "application/json", ...headers },
  });

test("signIn awaits get-session and stores the JWT before resolving", async () => {
  let release;
  const gate = new Promise((r) => { release = r; });
  const { fetch, calls } = scriptedFetch({
    "POST /api/auth/sign-in/email": [() => json(200, { redirect: false, token: "sess", user: SESSION.user })],
    "GET /api/auth/get-session": [async () => { await gate; return json(200, SESSION, { "set-auth-jwt": JWT }); }],
  });
  const storage = memoryStorage();
  const client = createAuthClient({ baseURL: BASE + "/", fetch, storage });
  let resolved = false;
  const p = client.signIn({ email: "ann@example.com", password: "pw" }).then((r) => { resolved = true; return r; });
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(resolved, false, "signIn resolved before get-session answered");
  assert.equal(storage.getItem("authToken"), null);
  release();
  const got = await p;
  assert.equal(got.token, JWT);
  assert.equal(got.user.id, "u1");
  assert.equal(storage.getItem("authToken"), JWT);
  assert.deepEqual(calls.map((c) => `${c.method} ${c.path}`), ["POST /api/auth/sign-in/email", "GET /api/auth/get-session"]);
  assert.equal(calls[0].init.credentials, "include");
  assert.equal(calls[1].init.credentials, "include");
  assert.deepEqual(JSON.parse(calls[0].init.body), { email: "ann@example.com", password: "pw" });
  assert.equal(calls[0].headers.get("content-type"), "application/json");
});

test("signUp posts name, email, password and awaits get-session", async () => {
  const { fetch, calls } = scriptedFetch({
    "POST /api/auth/sign-up/email": [() => json(200, { token: "sess", user: SESSION.user })],
    "GET /api/auth/get-session": [() => json(200, SESSION, { "set-auth-jwt": JWT })],
  });
  const storage = memoryStorage();
  const client = createAuthClient({ baseURL: BASE, fetch, storage });
  await client.signUp({ name: "Ann", email: "ann@example.com", password: "pw", extra: "dropped" });
  assert.deepEqual(JSON.parse(calls[0].init.body), { name: "Ann", email: "ann@example.com", password: "pw" });
  assert.equal(storage.getItem("authToken"), JWT);
});

test("errors reject with the sidecar's status, code and message", async () => {
  const { fetch, calls } = scriptedFetch({
    "POST /api/auth/sign-in/email": [() => json(401, { message: "Invalid email or password", code: "INVALID_EMAIL_OR_PASSWORD" })],
  });
  const client = createAuthClient({ baseURL: BASE, fetch, storage: memoryStorage() });
  await assert.rejects(client.signIn({ email: "a@b.c", password: "x" }), (err) => {
    assert.ok(err instanceof AuthError && err instanceof Error);
    assert.equal(err.status, 401);
    assert.equal(err.code, "INVALID_EMAIL_OR_PASSWORD");
    assert.equal(err.message, "Invalid email or password");
    return true;
  });
  assert.equal(calls.length, 1, "no get-session after a refused sign-in");
});

test("a network or CORS failure rejects with status 0", async () => {
  const client = createAuthClient({ baseURL: BASE, fetch: async () => { throw new TypeError("Failed to fetch"); }, storage: memoryStorage() });
  await assert.rejects(client.signIn({ email: "a@b.c", password: "x" }), { name: "AuthError", status: 0, code: "NETWORK_ERROR" });
});

test("signIn without a readable set-auth-jwt rejects with NO_JWT", async () => {
  const { fetch } = scriptedFetch({
    "POST /api/auth/sign-in/email": [() => json(200, { token: "sess" })],
    "GET /api/auth/get-session": [() => json(200, SESSION)], // header hidden by CORS
  });
  const storage = memoryStorage();
  const client = createAuthClient({ baseURL: BASE, fetch, storage });
  await assert.rejects(client.signIn({ email: "a@b.c", password: "x" }), { code: "NO_JWT" });
  assert.equal(storage.getItem("authToken"), null);
});

test("signOut posts {} and clears the token, even when the request fails", async () => {
  for (const answer of [() => json(200, { success: true }), () => json(503, { message: "down", code: "SERVICE_UNAVAILABLE" })]) {
    const { fetch, calls } = scriptedFetch({ "POST /api/auth/sign-out": [answer] });
    const storage = memoryStorage({ authToken: JWT, other: "kept" });
    const client = createAuthClient({ baseURL: BASE, fetch, storage });
    await client.signOut().catch(() => {});
    assert.equal(calls[0].init.body, "{}");
    assert.equal(calls[0].init.credentials, "include");
    assert.equal(storage.getItem("authToken"), null);
    assert.equal(storage.getItem("other"), "kept");
  }
});

test("getSession without a session resolves null and keeps storage", async () => {
  const { fetch } = scriptedFetch({ "GET /api/auth/get-session": [() => json(200, null)] });
  const storage = memoryStorage();
  const client = createAuthClient({ baseURL: BASE, fetch, storage });
  assert.equal(await client.getSession(), null);
  assert.equal(storage.map.size, 0);
});

test("fetch injects Authorization: Bearer and keeps the caller's init", async () => {
  const { fetch, calls } = scriptedFetch({ "POST /api/tasks": [() => json(201, { ok: true })] });
  const client = createAuthClient({ baseURL: BASE, fetch, storage: memoryStorage({ authToken: JWT }) });
  const res = await client.fetch("/api/tasks", { method: "POST", body: "{}", headers: { "X-Trace": "1" } });
  assert.equal(res.status, 201);
  assert.equal(calls[0].url, BASE + "/api/tasks");
  assert.equal(calls[0].headers.get("authorization"), `Bearer ${JWT}`);
  assert.equal(calls[0].headers.get("x-trace"), "1");
  assert.equal(calls[0].init.body, "{}");
});

test("fetch refuses paths that would leave baseURL", async () => {
  const client = createAuthClient({ baseURL: BASE, fetch: async () => assert.fail("sent"), storage: memoryStorage({ authToken: JWT }) });
  for (const p of ["https://evil.example/x", "//evil.example/x", "api/tasks"]) {
    assert.throws(() => client.webSocket(p), TypeError);
    await assert.rejects(client.fetch(p), TypeError);
  }
});

test("a 401 is retried exactly once after a fresh get-session", async () => {
  const NEW = "eyJuZXci.eyJuZXci.bmV3";
  const { fetch, calls } = scriptedFetch({
    "GET /api/tasks": [() => json(401, { code: "UNAUTHORIZED" }), () => json(200, { ok: true })],
    "GET /api/auth/get-session": [() => json(200, SESSION, { "set-auth-jwt": NEW })],
  });
  const storage = memoryStorage({ authToken: JWT });
  let unauthorized = 0;
  const client = createAuthClient({ baseURL: BASE, fetch, storage, onUnauthorized: () => unauthorized++ });
  const res = await client.fetch("/api/tasks");
  assert.equal(res.status, 200);
  assert.deepEqual(calls.map((c) => `${c.method} ${c.path}`), ["GET /api/tasks", "GET /api/auth/get-session", "GET /api/tasks"]);
  assert.equal(calls[0].headers.get("authorization"), `Bearer ${JWT}`);
  assert.equal(calls[2].headers.get("authorization"), `Bearer ${NEW}`);
  assert.equal(storage.getItem("authToken"), NEW);
  assert.equal(unauthorized, 0);
});

test("a second 401 after the retry calls onUnauthorized, no third try", async () => {
  const { fetch, calls } = scriptedFetch({
    "GET /api/tasks": [() => json(401, {}), () => json(401, {})],
    "GET /api/auth/get-session": [() => json(200, SESSION, { "set-auth-jwt": JWT })],
  });
  const seen = [];
  const client = createAuthClient({ baseURL: BASE, fetch, storage: memoryStorage({ authToken: JWT }), onUnauthorized: (r) => seen.push(r.status) });
  assert.equal((await client.fetch("/api/tasks")).status, 401);
  assert.equal(calls.length, 3);
  assert.deepEqual(seen, [401]);
});

test("no token and no cookie session: onUnauthorized, no retry", async () => {
  const { fetch, calls } = scriptedFetch({
    "GET /api/tasks": [() => json(401, { code: "UNAUTHORIZED" })],
    "GET /api/auth/get-session": [() => json(200, null)],
  });
  const seen = [];
  const client = createAuthClient({ baseURL: BASE, fetch, storage: memoryStorage(), onUnauthorized: (r) => seen.push(r.status) });
  const res = await client.fetch("/api/tasks");
  assert.equal(res.status, 401);
  assert.equal(calls[0].headers.get("authorization"), null);
  assert.deepEqual(calls.map((c) => c.path), ["/api/tasks", "/api/auth/get-session"]);
  assert.deepEqual(seen, [401]);
});

test("a failing get-session counts as no session", async () => {
  const { fetch, calls } = scriptedFetch({
    "GET /api/tasks": [() => json(401, {})],
    "GET /api/auth/get-session": [() => json(503, { code: "SERVICE_UNAVAILABLE", message: "down" })],
  });
  let called = false;
  const client = createAuthClient({ baseURL: BASE, fetch, storage: memoryStorage({ authToken: JWT }), onUnauthorized: () => { called = true; } });
  assert.equal((await client.fetch("/api/tasks")).status, 401);
  assert.equal(calls.length, 2);
  assert.ok(called);
});

test("concurrent 401s share one get-session", async () => {
  const { fetch, calls } = scriptedFetch({
    "GET /api/a": [() => json(401, {}), () => json(200, {})],
    "GET /api/b": [() => json(401, {}), () => json(200, {})],
    "GET /api/auth/get-session": [() => json(200, SESSION, { "set-auth-jwt": JWT })],
  });
  const client = createAuthClient({ baseURL: BASE, fetch, storage: memoryStorage() });
  const [a, b] = await Promise.all([client.fetch("/api/a"), client.fetch("/api/b")]);
  assert.deepEqual([a.status, b.status], [200, 200]);
  assert.equal(calls.filter((c) => c.path === "/api/auth/get-session").length, 1);
});

test("webSocket builds ws:/wss: URLs with the token URL-encoded", () => {
  const opened = [];
  class FakeWebSocket { constructor(url, protocols) { opened.push({ url, protocols }); } }
  const cases = [
    { base: "http://localhost:8080", token: JWT, path: "/ws/echo", want: `ws://localhost:8080/ws/echo?token=${JWT}` },
    { base: "https://app.example.com/", token: JWT, path: "/ws/chat?room=1", want: `wss://app.example.com/ws/chat?room=1&token=${JWT}` },
    { base: "http://localhost:8080", token: "a+b/c=d&e f", path: "/ws/echo", want: "ws://localhost:8080/ws/echo?token=a%2Bb%2Fc%3Dd%26e+f" },
    { base: "http://localhost:8080", token: JWT, path: "/ws/echo?token=stale", want: `ws://localhost:8080/ws/echo?token=${JWT}` },
    { base: "http://localhost:8080", token: null, path: "/ws/echo", want: "ws://localhost:8080/ws/echo" },
  ];
  for (const c of cases) {
    const storage = memoryStorage(c.token === null ? {} : { authToken: c.token });
    const client = createAuthClient({ baseURL: c.base, storage, WebSocket: FakeWebSocket, fetch: async () => assert.fail("fetch") });
    client.webSocket(c.path, ["v1"]);
    const got = opened.pop();
    assert.equal(got.url, c.want, `${c.base} ${c.path}`);
    assert.deepEqual(got.protocols, ["v1"]);
    if (c.token) assert.equal(new URL(got.url).searchParams.get("token"), c.token, "token round-trips");
  }
});

test("token() reads localStorage authToken", () => {
  const client = createAuthClient({ baseURL: BASE, storage: memoryStorage({ authToken: JWT }), fetch: async () => {} });
  assert.equal(client.token(), JWT);
});

// Account recovery: the paths and JSON bodies of Better Auth's client.
test("recovery calls post Better Auth's bodies with the cookie and resolve the sidecar's JSON", async () => {
  const ok = { status: true, message: "If this email exists in our system, check your email for the reset link" };
  const cases = [
    { call: (c) => c.requestPasswordReset({ email: "ann@example.com", redirectTo: "/?flow=reset", extra: 1 }),
      path: "/api/auth/request-password-reset", body: { email: "ann@example.com", redirectTo: "/?flow=reset" }, answer: ok },
    { call: (c) => c.requestPasswordReset({ email: "ann@example.com" }),
      path: "/api/auth/request-password-reset", body: { email: "ann@example.com" }, answer: ok },
    { call: (c) => c.resetPassword({ newPassword: "new-password-1", token: "tok" }),
      path: "/api/auth/reset-password", body: { newPassword: "new-password-1", token: "tok" }, answer: { status: true } },
    { call: (c) => c.sendVerificationEmail({ email: "ann@example.com", callbackURL: "/?flow=verified" }),
      path: "/api/auth/send-verification-email", body: { email: "ann@example.com", callbackURL: "/?flow=verified" }, answer: { status: true } },
    { call: (c) => c.sendVerificationEmail({ email: "ann@example.com" }),
      path: "/api/auth/send-verification-email", body: { email: "ann@example.com" }, answer: { status: true } },
  ];
  for (const tc of cases) {
    const { fetch, calls } = scriptedFetch({ [`POST ${tc.path}`]: [() => json(200, tc.answer)] });
    const client = createAuthClient({ baseURL: BASE, fetch, storage: memoryStorage() });
    assert.deepEqual(await tc.call(client), tc.answer, tc.path);
    assert.equal(calls.length, 1, `${tc.path}: one request, no get-session`);
    assert.deepEqual(JSON.parse(calls[0].init.body), tc.body, tc.path);
    assert.equal(calls[0].headers.get("content-type"), "application/json");
    assert.equal(calls[0].init.credentials, "include");
  }
});

test("recovery errors reject with the sidecar's status and code", async () => {
  const cases = [
    { call: (c) => c.requestPasswordReset({ email: "ann@example.com", redirectTo: "https://evil.example/" }),
      route: "POST /api/auth/request-password-reset", status: 403, body: { message: "Invalid redirectURL", code: "INVALID_REDIRECT_URL" } },
    { call: (c) => c.requestPasswordReset({ email: "ann@example.com" }),
      route: "POST /api/auth/request-password-reset", status: 429, body: { message: "Too many requests. Please try again later." }, code: "HTTP_429" },
    { call: (c) => c.resetPassword({ newPassword: "new-password-1", token: "used" }),
      route: "POST /api/auth/reset-password", status: 400, body: { message: "Invalid token", code: "INVALID_TOKEN" } },
    { call: (c) => c.resetPassword({ newPassword: "short", token: "tok" }),
      route: "POST /api/auth/reset-password", status: 400, body: { message: "Password too short", code: "PASSWORD_TOO_SHORT" } },
    { call: (c) => c.sendVerificationEmail({ email: "bob@example.com" }),
      route: "POST /api/auth/send-verification-email", status: 400, body: { message: "Email mismatch", code: "EMAIL_MISMATCH" } },
    { call: (c) => c.verifyEmail({ token: "used" }),
      route: "GET /api/auth/verify-email?token=used", status: 401, body: { message: "Invalid token", code: "INVALID_TOKEN" } },
  ];
  for (const tc of cases) {
    const { fetch, calls } = scriptedFetch({ [tc.route]: [() => json(tc.status, tc.body)] });
    const storage = memoryStorage({ authToken: JWT });
    const client = createAuthClient({ baseURL: BASE, fetch, storage });
    await assert.rejects(tc.call(client), (err) => {
      assert.ok(err instanceof AuthError, tc.route);
      assert.equal(err.status, tc.status, tc.route);
      assert.equal(err.code, tc.code ?? tc.body.code, tc.route);
      assert.equal(err.message, tc.body.message, tc.route);
      return true;
    });
    assert.equal(calls.length, 1, `${tc.route}: nothing after a refusal`);
    assert.equal(storage.getItem("authToken"), JWT, `${tc.route}: a refusal keeps the stored JWT`);
  }
});

test("resetPassword removes the stored JWT once the password is changed", async () => {
  const { fetch } = scriptedFetch({ "POST /api/auth/reset-password": [() => json(200, { status: true })] });
  const storage = memoryStorage({ authToken: JWT, other: "kept" });
  const client = createAuthClient({ baseURL: BASE, fetch, storage });
  await client.resetPassword({ newPassword: "new-password-1", token: "tok" });
  assert.equal(storage.getItem("authToken"), null);
  assert.equal(storage.getItem("other"), "kept");
});

// redirected marks a Response as the end of a followed redirect, as fetch
// does (Node's Response constructor cannot).
const redirected = (res, url) => Object.defineProperties(res, { redirected: { value: true }, url: { value: url } });

test("verifyEmail spends the token with a GET, then awaits get-session and stores the JWT", async () => {
  const TOKEN = "a+b/c=d&e f"; // ours are base64url, but any string must survive the query
  let release;
  const gate = new Promise((r) => { release = r; });
  const { fetch, calls } = scriptedFetch({
    [`GET /api/auth/verify-email?token=${encodeURIComponent(TOKEN).replace(/%20/g, "+")}`]: [() => json(200, { status: true, user: null })],
    "GET /api/auth/get-session": [async () => { await gate; return json(200, SESSION, { "set-auth-jwt": JWT }); }],
  });
  const storage = memoryStorage();
  const client = createAuthClient({ baseURL: BASE, fetch, storage });
  let resolved = false;
  const p = client.verifyEmail({ token: TOKEN }).then((r) => { resolved = true; return r; });
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(resolved, false, "verifyEmail resolved before get-session answered");
  release();
  const got = await p;
  assert.equal(got.token, JWT);
  assert.equal(got.user.id, "u1");
  assert.equal(storage.getItem("authToken"), JWT);
  assert.equal(new URL(calls[0].url).searchParams.get("token"), TOKEN);
  assert.equal(calls[0].init.body, undefined);
  assert.equal(calls[0].headers.get("content-type"), null, "a GET without a body has no content type");
  assert.equal(calls[0].init.credentials, "include", "the cookie the link sets must be kept");
});

test("verifyEmail of an address already verified resolves null without a session", async () => {
  const { fetch } = scriptedFetch({
    "GET /api/auth/verify-email?token=t": [() => json(200, { status: true, user: null })],
    "GET /api/auth/get-session": [() => json(200, null)],
  });
  const storage = memoryStorage();
  const client = createAuthClient({ baseURL: BASE, fetch, storage });
  assert.equal(await client.verifyEmail({ token: "t" }), null);
  assert.equal(storage.map.size, 0);
});

test("verifyEmail with callbackURL reads the outcome from where the redirect landed", async () => {
  const route = "GET /api/auth/verify-email?token=t&callbackURL=%2F%3Fflow%3Dverified";
  const page = () => new Response("<!doctype html>", { status: 200, headers: { "content-type": "text/html" } });
  // Refused: the sidecar redirects to callbackURL with ?error=CODE.
  {
    const { fetch, calls } = scriptedFetch({ [route]: [() => redirected(page(), BASE + "/?flow=verified&error=INVALID_TOKEN")] });
    const client = createAuthClient({ baseURL: BASE, fetch, storage: memoryStorage() });
    await assert.rejects(client.verifyEmail({ token: "t", callbackURL: "/?flow=verified" }), { name: "AuthError", status: 401, code: "INVALID_TOKEN" });
    assert.equal(calls.length, 1, "no get-session after a refused link");
  }
  // Accepted: the redirect lands on callbackURL as given, signed in.
  {
    const { fetch, calls } = scriptedFetch({
      [route]: [() => redirected(page(), BASE + "/?flow=verified")],
      "GET /api/auth/get-session": [() => json(200, SESSION, { "set-auth-jwt": JWT })],
    });
    const storage = memoryStorage();
    const client = createAuthClient({ baseURL: BASE, fetch, storage });
    const got = await client.verifyEmail({ token: "t", callbackURL: "/?flow=verified" });
    assert.equal(got.token, JWT);
    assert.equal(storage.getItem("authToken"), JWT);
    assert.equal(calls.length, 2);
  }
});

test("signInSocial posts Better Auth's body and sends the browser to the provider", async () => {
  const { fetch, calls } = scriptedFetch({
    "POST /api/auth/sign-in/social": [() => json(200, { url: "https://idp.example.com/auth?state=s", redirect: true })],
  });
  const went = [];
  const client = createAuthClient({ baseURL: BASE, fetch, storage: memoryStorage(), navigate: (u) => went.push(u) });
  const got = await client.signInSocial({ provider: "corp", callbackURL: "/app" });
  assert.deepEqual(JSON.parse(calls[0].init.body), { provider: "corp", callbackURL: "/app" });
  assert.equal(calls[0].init.credentials, "include");
  assert.deepEqual(went, ["https://idp.example.com/auth?state=s"]);
  assert.equal(got.redirect, true);
});

test("signInSocial rejects with the sidecar's code and goes nowhere", async () => {
  const { fetch } = scriptedFetch({
    "POST /api/auth/sign-in/social": [() => json(404, { message: "Provider not found", code: "PROVIDER_NOT_FOUND" })],
  });
  const went = [];
  const client = createAuthClient({ baseURL: BASE, fetch, storage: memoryStorage(), navigate: (u) => went.push(u) });
  await assert.rejects(client.signInSocial({ provider: "nope" }), (e) => e instanceof AuthError && e.status === 404 && e.code === "PROVIDER_NOT_FOUND");
  assert.deepEqual(went, []);
});
