// client-check.mjs drives authsidecar's /api/auth/* with Better Auth's own
// browser client (better-auth/client + jwtClient) and checks every response
// the way a web app depends on it. It was first run against real Better Auth
// 1.7.25 (as observed on a real server; docs/protocol.md, Better Auth compatibility).
//
// Environment:
//   BASE_URL     server root, e.g. http://127.0.0.1:18080 (required)
//   BASE_PATH    auth mount path (default /api/auth)
//   COOKIE_NAME  session cookie name (default auth.session_token)
//   EXPECT_TTL   JWT exp - iat in seconds (default 2592000 = 30 days, per docs/protocol.md)
//   EXPECT_ISS   JWT iss (default: origin of BASE_URL)
//   EXPECT_AUD   JWT aud (default: origin of BASE_URL)
//   MAIL_URL     where the mailed links can be read: GET answers the mails sent so
//                far as [{kind: "reset-password"|"verify-email", to, url}], the shape of
//                the reference server's GET /__mail. Unset: the account-recovery
//                checks are skipped (a SKIP line says so).
//   VERIFY_REUSE what a used verification link gets: "refused" (default: authsidecar,
//                401 INVALID_TOKEN) or "accepted" (Better Auth: its links are stateless
//                JWTs that work until they expire)
//   ACCOUNT_CHECKS "1" runs the session and account checks (list-sessions,
//                revoke-session(s), revoke-other-sessions, update-user, change-email,
//                change-password with revokeOtherSessions, delete-user). Unset: skipped.
//   BUSINESS_URL a route the server authenticates with the Bearer JWT (authsidecar:
//                BASE_URL/api/tasks): with it, each revocation is checked where it
//                matters, the revoked JWT refused (401) and the others not. Unset: the
//                revocation checks are skipped (Better Auth has no such route).
//   CHANGE_EMAIL what change-email does to an unverified address: "mail"
//                (default: authsidecar with mail on, and Better Auth without
//                updateEmailWithoutVerification: only a link is mailed) or
//                "immediate" (Better Auth with updateEmailWithoutVerification)
//   DELETE_USER  "allowed" (the server enables delete-user) or unset (it answers 404)
//   VERIFY_SIGNS_IN whether a verification link signs in a browser without a
//                session: "yes" (default: Better Auth's autoSignInAfterVerification,
//                authsidecar's auth.sign_in_after_verification) or "no" (the default of
//                both: the link only verifies)
//
// Output: one "PASS <name> - detail" or "FAIL <name> - detail" line per check,
// then "N passed, M failed" alone on a line. Exit 0 only if nothing failed.

import { createAuthClient } from "better-auth/client";
import { jwtClient } from "better-auth/client/plugins";
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from "jose";

const TIMEOUT_MS = 90_000;

const BASE_URL = (process.env.BASE_URL ?? "").replace(/\/+$/, "");
if (!BASE_URL) {
	console.log("FAIL config - BASE_URL is not set (e.g. BASE_URL=http://127.0.0.1:18080)");
	console.log("0 passed, 1 failed");
	process.exit(1);
}
const BASE_PATH = process.env.BASE_PATH ?? "/api/auth";
const ORIGIN = new URL(BASE_URL).origin;
const COOKIE_NAME = process.env.COOKIE_NAME || "auth.session_token";
const EXPECT_TTL = Number(process.env.EXPECT_TTL || 2592000);
const EXPECT_ISS = process.env.EXPECT_ISS || ORIGIN;
const EXPECT_AUD = process.env.EXPECT_AUD || ORIGIN;
const JWKS_URL = new URL(BASE_URL + BASE_PATH + "/jwks");
const MAIL_URL = process.env.MAIL_URL ?? "";
const VERIFY_REUSE = process.env.VERIFY_REUSE || "refused";
const VERIFY_SIGNS_IN = (process.env.VERIFY_SIGNS_IN || "yes") === "yes";

let passed = 0;
let failed = 0;

function report(ok, name, detail = "") {
	if (ok) passed++;
	else failed++;
	console.log(`${ok ? "PASS" : "FAIL"} ${name}${detail ? " - " + detail : ""}`);
	return ok;
}

function summary() {
	console.log(`${passed} passed, ${failed} failed`);
}

// The whole run is bounded so a hung server cannot hang the Go test.
const watchdog = setTimeout(() => {
	report(false, "timeout", `script did not finish within ${TIMEOUT_MS / 1000}s`);
	summary();
	process.exit(1);
}, TIMEOUT_MS);

const json = (v) => {
	try {
		return JSON.stringify(v);
	} catch {
		return String(v);
	}
};
const clip = (s, n = 400) => (s && s.length > n ? s.slice(0, n) + "…" : s);

// ---------------------------------------------------------------------------
// Cookie jar and browser-like fetch.
//
// Node's fetch keeps no cookies, so this wrapper stores Set-Cookie values and
// sends them back as Cookie, and adds Origin on non-GET requests like a
// browser does (Better Auth rejects cookie-carrying POSTs without it). Every
// exchange is logged so checks can look at raw status, headers and body.

const jar = new Map(); // cookie name -> value
const exchanges = []; // {method, path, status, headers, setCookies, body}

function parseSetCookie(line) {
	const [pair, ...attrs] = line.split(";");
	const eq = pair.indexOf("=");
	const name = pair.slice(0, eq).trim();
	const value = pair.slice(eq + 1).trim();
	const a = {};
	for (const attr of attrs) {
		const i = attr.indexOf("=");
		const k = (i < 0 ? attr : attr.slice(0, i)).trim().toLowerCase();
		a[k] = i < 0 ? true : attr.slice(i + 1).trim();
	}
	let expired = false;
	if ("max-age" in a && Number(a["max-age"]) <= 0) expired = true;
	else if (!("max-age" in a) && "expires" in a && Date.parse(a.expires) <= Date.now()) expired = true;
	return { name, value, attrs: a, expired, raw: line };
}

async function jarFetch(input, init = {}) {
	const url = new URL(input instanceof Request ? input.url : String(input));
	const method = (init.method || (input instanceof Request ? input.method : "GET")).toUpperCase();
	const headers = new Headers(init.headers || (input instanceof Request ? input.headers : undefined));
	if (!headers.has("cookie") && jar.size > 0) {
		headers.set("cookie", [...jar].map(([k, v]) => `${k}=${v}`).join("; "));
	}
	if (method !== "GET" && method !== "HEAD" && !headers.has("origin")) headers.set("origin", ORIGIN);

	const res = await fetch(input, { ...init, method, headers });

	const setCookies = res.headers.getSetCookie().map(parseSetCookie);
	for (const c of setCookies) {
		if (c.expired) jar.delete(c.name);
		else jar.set(c.name, c.value);
	}
	let body = "";
	try {
		body = await res.clone().text();
	} catch (e) {
		body = `<unreadable body: ${e.message}>`;
	}
	exchanges.push({ method, path: url.pathname, status: res.status, headers: res.headers, setCookies, body });
	return res;
}

// The last logged exchange for a path under BASE_PATH, e.g. last("/sign-in/email").
function last(path) {
	for (let i = exchanges.length - 1; i >= 0; i--) {
		if (exchanges[i].path === BASE_PATH + path) return exchanges[i];
	}
	return undefined;
}

function describe(ex) {
	if (!ex) return "no request was made";
	return `status=${ex.status} body=${clip(ex.body)}`;
}

function sessionCookieSet(ex) {
	return ex?.setCookies.find((c) => c.name === COOKIE_NAME && !c.expired);
}

function exposesJwtHeader(headers) {
	const v = headers?.get("access-control-expose-headers") ?? "";
	return v
		.split(",")
		.map((s) => s.trim().toLowerCase())
		.includes("set-auth-jwt");
}

// ---------------------------------------------------------------------------

const client = createAuthClient({
	baseURL: BASE_URL,
	basePath: BASE_PATH,
	plugins: [jwtClient()],
	fetchOptions: { customFetchImpl: jarFetch },
});

const jwks = createRemoteJWKSet(JWKS_URL);

// verify checks a JWT the way a resource server does. It returns the payload
// and protected header, or throws.
async function verify(token, keySet = jwks) {
	const { payload, protectedHeader } = await jwtVerify(token, keySet, {
		issuer: EXPECT_ISS,
		audience: EXPECT_AUD,
		algorithms: ["EdDSA"],
	});
	return { payload, protectedHeader };
}

async function main() {
	const stamp = `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
	const email = `client-check+${stamp}@example.com`;
	const password = "correct-horse-battery-staple";
	const name = "Client Check";

	// 1. Sign-up.
	const up = await client.signUp.email({ name, email, password });
	const upEx = last("/sign-up/email");
	const user = up.data?.user;
	report(
		!up.error && typeof up.data?.token === "string" && up.data.token.length > 0 && typeof user?.id === "string" && user.email === email,
		"sign-up/email returns {token,user}",
		up.error ? `${json(up.error)} ${describe(upEx)}` : `user.id=${user?.id} email=${user?.email} token=${up.data?.token ? "set" : "missing"}`,
	);
	const upCookie = sessionCookieSet(upEx);
	report(!!upCookie, `sign-up sets ${COOKIE_NAME} cookie`, upCookie ? Object.entries(upCookie.attrs).map(([k, v]) => (v === true ? k : `${k}=${v}`)).join("; ") : `set-cookie=${json(upEx?.setCookies.map((c) => c.raw))} ${describe(upEx)}`);
	report(upEx && !upEx.headers.has("set-auth-jwt"), "sign-up response has no set-auth-jwt header", upEx ? `set-auth-jwt=${upEx.headers.get("set-auth-jwt") ?? "absent"}` : "no request was made");

	// 2. Duplicate sign-up.
	const dup = await client.signUp.email({ name, email, password });
	report(
		dup.error?.status === 422 && dup.error?.code === "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL",
		"duplicate sign-up rejected (422 USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL)",
		dup.error ? json(dup.error) : `unexpected success ${describe(last("/sign-up/email"))}`,
	);

	// 3. Sign-out after sign-up.
	const out1 = await client.signOut();
	report(out1.data?.success === true && !out1.error, "sign-out after sign-up returns {success:true}", out1.error ? `${json(out1.error)} ${describe(last("/sign-out"))}` : json(out1.data));

	// 4. Wrong password.
	const bad = await client.signIn.email({ email, password: password + "-wrong" });
	report(
		bad.error?.status === 401 && bad.error?.code === "INVALID_EMAIL_OR_PASSWORD",
		"sign-in with wrong password rejected (401 INVALID_EMAIL_OR_PASSWORD)",
		bad.error ? json(bad.error) : `unexpected success ${describe(last("/sign-in/email"))}`,
	);

	// 5. Sign-in.
	const inn = await client.signIn.email({ email, password });
	const inEx = last("/sign-in/email");
	report(
		!inn.error && inn.data?.redirect === false && typeof inn.data?.token === "string" && inn.data.token.length > 0 && inn.data?.user?.id === user?.id,
		"sign-in/email returns {redirect:false,token,user}",
		inn.error ? `${json(inn.error)} ${describe(inEx)}` : `redirect=${inn.data?.redirect} token=${inn.data?.token ? "set" : "missing"} user.id=${inn.data?.user?.id}`,
	);
	const inCookie = sessionCookieSet(inEx);
	report(!!inCookie, `sign-in sets ${COOKIE_NAME} cookie`, inCookie ? "" : `set-cookie=${json(inEx?.setCookies.map((c) => c.raw))} ${describe(inEx)}`);
	report(inEx && !inEx.headers.has("set-auth-jwt"), "sign-in response has no set-auth-jwt header", inEx ? `set-auth-jwt=${inEx.headers.get("set-auth-jwt") ?? "absent"}` : "no request was made");
	const oldCookie = inCookie ? `${COOKIE_NAME}=${inCookie.value}` : undefined;

	// 6. getSession (GET), reading set-auth-jwt the documented way.
	let jwt = null;
	let sessHeaders = null;
	const sess = await client.getSession({
		fetchOptions: {
			onSuccess: (ctx) => {
				jwt = ctx.response.headers.get("set-auth-jwt");
				sessHeaders = ctx.response.headers;
			},
		},
	});
	const gsEx = last("/get-session");
	report(
		!sess.error && sess.data?.user?.id === user?.id && sess.data?.session?.userId === user?.id && typeof sess.data?.session?.id === "string",
		"getSession returns {session,user} for the signed-in user",
		sess.error || !sess.data ? `error=${json(sess.error)} data=${json(sess.data)} ${describe(gsEx)}` : `method=${gsEx?.method} session.id=${sess.data.session?.id} session.userId=${sess.data.session?.userId} user.id=${sess.data.user?.id}`,
	);
	report(!!jwt, "get-session response carries set-auth-jwt header", jwt ? `${jwt.length} chars` : `headers=${json(Object.fromEntries(gsEx?.headers ?? []))} ${describe(gsEx)}`);
	report(exposesJwtHeader(sessHeaders ?? gsEx?.headers), "Access-Control-Expose-Headers includes set-auth-jwt", `${(sessHeaders ?? gsEx?.headers)?.get("access-control-expose-headers") ?? "absent"}`);

	let claims = null;
	if (jwt) {
		let hdr = null;
		try {
			hdr = decodeProtectedHeader(jwt);
		} catch (e) {
			hdr = { error: e.message };
		}
		report(hdr?.alg === "EdDSA" && typeof hdr?.kid === "string" && hdr.kid.length > 0, "JWT header alg=EdDSA with kid", json(hdr));
		try {
			({ payload: claims } = await verify(jwt));
			report(true, `JWT verifies against ${JWKS_URL} (iss/aud=${EXPECT_ISS}${EXPECT_AUD !== EXPECT_ISS ? "/" + EXPECT_AUD : ""})`);
		} catch (e) {
			report(false, `JWT verifies against ${JWKS_URL} (iss/aud=${EXPECT_ISS})`, `${e.code ?? e.name}: ${e.message}`);
		}
		if (claims) {
			report(claims.sub === user?.id, "JWT sub == user.id", `sub=${claims.sub} user.id=${user?.id}`);
			report(claims.exp - claims.iat === EXPECT_TTL, `JWT exp - iat == ${EXPECT_TTL}s`, `iat=${claims.iat} exp=${claims.exp} lifetime=${claims.exp - claims.iat}s`);
			report(claims.email === email, "JWT carries user claims (email)", `email=${claims.email} claims=${Object.keys(claims).join(",")}`);
		} else {
			report(false, "JWT claims checks skipped (JWT did not verify)");
		}
	} else {
		report(false, "JWT checks skipped (no set-auth-jwt)");
	}

	// 7. client.jwks() from jwtClient.
	const keys = await client.jwks();
	const jwksEx = last("/jwks");
	const keyList = Array.isArray(keys.data?.keys) ? keys.data.keys : null;
	const wellFormed = keyList && keyList.length > 0 && keyList.every((k) => typeof k.kid === "string" && typeof k.kty === "string" && typeof k.alg === "string");
	const leaked = keyList?.filter((k) => "d" in k || "p" in k || "q" in k) ?? [];
	let jwtKid = null;
	try {
		jwtKid = jwt ? decodeProtectedHeader(jwt).kid : null;
	} catch {}
	report(
		!keys.error && wellFormed && leaked.length === 0 && (!jwtKid || keyList.some((k) => k.kid === jwtKid)),
		"client.jwks() returns {keys:[{kid,kty,alg,...}]} with no private members and the JWT's kid",
		keys.error ? `${json(keys.error)} ${describe(jwksEx)}` : leaked.length ? `PRIVATE KEY MATERIAL EXPOSED in kid=${leaked.map((k) => k.kid).join(",")}` : json(keys.data),
	);

	// 8. GET /token. jwtClient has no token action; the client's path proxy
	// turns client.token() into GET /token (Better Auth docs: authClient.token()).
	const tok = await client.token();
	const tokEx = last("/token");
	if (!tok.error && typeof tok.data?.token === "string") {
		try {
			const { payload } = await verify(tok.data.token);
			const ok = payload.sub === user?.id && payload.exp - payload.iat === EXPECT_TTL;
			report(ok, "GET /token returns {token} that verifies", `method=${tokEx?.method} sub=${payload.sub} lifetime=${payload.exp - payload.iat}s`);
		} catch (e) {
			report(false, "GET /token returns {token} that verifies", `${e.code ?? e.name}: ${e.message}`);
		}
	} else {
		report(false, "GET /token returns {token} that verifies", `error=${json(tok.error)} data=${json(tok.data)} ${describe(tokEx)}`);
	}

	// 9. Sign-out.
	const out2 = await client.signOut();
	const outEx = last("/sign-out");
	report(out2.data?.success === true && !out2.error, "sign-out returns {success:true}", out2.error ? `${json(out2.error)} ${describe(outEx)}` : json(out2.data));
	const expired = outEx?.setCookies.find((c) => c.name === COOKIE_NAME && c.expired);
	report(!!expired && !jar.has(COOKIE_NAME), "sign-out expires the session cookie", expired ? expired.raw : `set-cookie=${json(outEx?.setCookies.map((c) => c.raw))} ${describe(outEx)}`);

	// 10. getSession afterwards.
	const after = await client.getSession();
	report(!after.error && after.data === null, "getSession after sign-out is null", `error=${json(after.error)} data=${json(after.data)} ${after.error ? describe(last("/get-session")) : ""}`.trim());

	// 11. The signed-out session cookie itself is dead server-side, not just
	// dropped from the jar.
	if (oldCookie) {
		const replay = await client.$fetch("/get-session", { method: "GET", headers: { cookie: oldCookie } });
		report(!replay.error && replay.data === null, "old session cookie after sign-out gets null", `error=${json(replay.error)} data=${clip(json(replay.data))}`);
	} else {
		report(false, "old session cookie after sign-out gets null", "skipped: sign-in set no cookie");
	}

	// 12. The earlier JWT's signature still verifies against a freshly
	// fetched key set: a revocation is the server's check, not the key's.
	if (jwt) {
		try {
			const { payload } = await verify(jwt, createRemoteJWKSet(JWKS_URL));
			report(payload.sub === user?.id, "JWT issued before sign-out still verifies offline (revocation is the server's check)", `sub=${payload.sub}`);
		} catch (e) {
			report(false, "JWT issued before sign-out still verifies offline (revocation is the server's check)", `${e.code ?? e.name}: ${e.message}`);
		}
	} else {
		report(false, "JWT issued before sign-out still verifies offline (revocation is the server's check)", "skipped: no JWT was issued");
	}
}

// ---------------------------------------------------------------------------
// Account recovery: the links are read where the server's mail went
// (MAIL_URL), then handed to the client calls as an app would.

async function mails(kind, to) {
	const res = await fetch(MAIL_URL);
	if (!res.ok) throw new Error(`GET ${MAIL_URL}: ${res.status}`);
	return (await res.json()).filter((m) => m.kind === kind && m.to === to);
}

// waitMail returns the mail of kind to `to` that follows the first `skip`
// ones, or null after 10 s (delivery is asynchronous).
async function waitMail(kind, to, skip) {
	for (const deadline = Date.now() + 10_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
		const got = await mails(kind, to);
		if (got.length > skip) return got[skip];
	}
	return null;
}

const RESET_MESSAGE = "If this email exists in our system, check your email for the reset link";

async function recovery(stamp, password) {
	if (!MAIL_URL) {
		console.log("SKIP account recovery - MAIL_URL is not set");
		return;
	}
	const email = `client-reset+${stamp}@example.com`;
	const name = "Client Reset";
	const up = await client.signUp.email({ name, email, password });
	report(!up.error, "sign-up of the account to reset", up.error ? `${json(up.error)} ${describe(last("/sign-up/email"))}` : "");
	await client.signOut();

	// 13. requestPasswordReset: the same answer for known and unknown addresses.
	const before = (await mails("reset-password", email)).length;
	const req = await client.requestPasswordReset({ email, redirectTo: "/reset-landing" });
	report(
		!req.error && req.data?.status === true && req.data?.message === RESET_MESSAGE,
		"requestPasswordReset returns {status:true,message}",
		req.error ? `${json(req.error)} ${describe(last("/request-password-reset"))}` : json(req.data),
	);
	const unknown = await client.requestPasswordReset({ email: `nobody+${stamp}@example.com`, redirectTo: "/reset-landing" });
	report(!unknown.error && json(unknown.data) === json(req.data), "requestPasswordReset answers an unknown address alike", json(unknown.error ?? unknown.data));

	// 14. The mailed link, and where it leads.
	const mail = await waitMail("reset-password", email, before);
	const prefix = `${BASE_URL}${BASE_PATH}/reset-password/`;
	const linkToken = mail?.url.startsWith(prefix) ? mail.url.slice(prefix.length).split("?")[0] : "";
	report(
		!!linkToken && mail.url === `${prefix}${linkToken}?callbackURL=${encodeURIComponent("/reset-landing")}`,
		"the reset mail carries {baseURL}/reset-password/<token>?callbackURL=<redirectTo>",
		mail ? clip(mail.url, 160) : "no mail within 10 s",
	);
	let token = "";
	if (mail) {
		const follow = await fetch(mail.url, { redirect: "manual" });
		const loc = follow.headers.get("location") ?? "";
		const landing = loc ? new URL(loc, BASE_URL) : null;
		token = landing?.searchParams.get("token") ?? "";
		report(
			follow.status === 302 && landing?.origin === ORIGIN && landing.pathname === "/reset-landing" && token === linkToken,
			"opening the reset link redirects to redirectTo with ?token=",
			`status=${follow.status} location=${clip(loc, 160)}`,
		);
	} else {
		report(false, "opening the reset link redirects to redirectTo with ?token=", "skipped: no mail");
	}

	// 15. resetPassword with a bad, the mailed, and the spent token.
	const newPassword = password + "-reset";
	const bad = await client.resetPassword({ newPassword, token: "not-a-token" });
	report(
		bad.error?.status === 400 && bad.error?.code === "INVALID_TOKEN" && bad.error?.message === "Invalid token",
		"resetPassword with a bad token: 400 INVALID_TOKEN",
		json(bad.error ?? bad.data),
	);
	const reset = await client.resetPassword({ newPassword, token });
	report(!reset.error && reset.data?.status === true, "resetPassword with the mailed token returns {status:true}", reset.error ? `${json(reset.error)} ${describe(last("/reset-password"))}` : json(reset.data));
	const again = await client.resetPassword({ newPassword: newPassword + "-again", token });
	report(again.error?.status === 400 && again.error?.code === "INVALID_TOKEN", "the reset token works once (again: 400 INVALID_TOKEN)", json(again.error ?? again.data));

	// 16. The old password is gone, the new one works.
	const old = await client.signIn.email({ email, password });
	report(old.error?.status === 401 && old.error?.code === "INVALID_EMAIL_OR_PASSWORD", "sign-in with the old password fails after the reset", json(old.error ?? old.data));
	const fresh = await client.signIn.email({ email, password: newPassword });
	report(!fresh.error && fresh.data?.user?.email === email, "sign-in with the new password works", json(fresh.error ?? "ok"));
	await client.signOut();

	// 17. sendVerificationEmail, signed in as a new (unverified) user.
	const vEmail = `client-verify+${stamp}@example.com`;
	const vUp = await client.signUp.email({ name: "Client Verify", email: vEmail, password });
	report(!vUp.error && vUp.data?.user?.emailVerified === false, "a new user is unverified", json(vUp.error ?? vUp.data?.user));
	const vBefore = (await mails("verify-email", vEmail)).length;
	const send = await client.sendVerificationEmail({ email: vEmail, callbackURL: "/verified" });
	report(!send.error && send.data?.status === true, "sendVerificationEmail returns {status:true}", send.error ? `${json(send.error)} ${describe(last("/send-verification-email"))}` : json(send.data));
	const mismatch = await client.sendVerificationEmail({ email, callbackURL: "/verified" });
	report(mismatch.error?.status === 400 && mismatch.error?.code === "EMAIL_MISMATCH", "sendVerificationEmail for another address, signed in: 400 EMAIL_MISMATCH", json(mismatch.error ?? mismatch.data));
	const vMail = await waitMail("verify-email", vEmail, vBefore);
	const vURL = vMail ? new URL(vMail.url) : null;
	const vToken = vURL?.searchParams.get("token") ?? "";
	report(
		vURL?.origin === ORIGIN && vURL.pathname === BASE_PATH + "/verify-email" && !!vToken && vURL.searchParams.get("callbackURL") === "/verified",
		"the verification mail carries {baseURL}/verify-email?token=<token>&callbackURL=<callbackURL>",
		vMail ? clip(vMail.url, 160) : "no mail within 10 s",
	);

	// 18. verifyEmail with the mailed token, signed out: it verifies, and
	// signs in when the server lets a link do that.
	await client.signOut();
	const ver = await client.verifyEmail({ query: { token: vToken } });
	const verEx = last("/verify-email");
	report(!ver.error && ver.data?.status === true && ver.data?.user === null, "verifyEmail returns {status:true,user:null}", ver.error ? `${json(ver.error)} ${describe(verEx)}` : json(ver.data));
	if (VERIFY_SIGNS_IN) {
		report(!!sessionCookieSet(verEx), `verifyEmail sets the ${COOKIE_NAME} cookie (signed in)`, `set-cookie=${json(verEx?.setCookies.map((c) => c.name))}`);
	} else {
		report(!sessionCookieSet(verEx), `verifyEmail sets no ${COOKIE_NAME} cookie (the link only verifies)`, `set-cookie=${json(verEx?.setCookies.map((c) => c.name))}`);
		const none = await client.getSession();
		report(!none.error && none.data === null, "getSession after verifyEmail: still signed out", json(none.error ?? none.data));
		const back = await client.signIn.email({ email: vEmail, password });
		report(!back.error && back.data?.user?.emailVerified === true, "sign-in after verifyEmail: the user, emailVerified true", json(back.error ?? back.data?.user));
	}
	const vs = await client.getSession();
	report(vs.data?.user?.email === vEmail && vs.data?.user?.emailVerified === true, "getSession after verifyEmail: that user, emailVerified true", json(vs.error ?? vs.data?.user));
	const verified = await client.sendVerificationEmail({ email: vEmail });
	report(verified.error?.status === 400 && verified.error?.code === "EMAIL_ALREADY_VERIFIED", "sendVerificationEmail once verified, signed in: 400 EMAIL_ALREADY_VERIFIED", json(verified.error ?? verified.data));
	const reuse = await client.verifyEmail({ query: { token: vToken } });
	if (VERIFY_REUSE === "accepted") {
		report(!reuse.error && reuse.data?.status === true, "a used verification link is accepted again", json(reuse.error ?? reuse.data));
	} else {
		report(reuse.error?.status === 401 && reuse.error?.code === "INVALID_TOKEN", "a used verification link: 401 INVALID_TOKEN", json(reuse.error ?? reuse.data));
	}

	// 19. The pre-1.7 name is gone, as in Better Auth 1.7.25.
	const forget = await client.forgetPassword({ email, redirectTo: "/reset-landing" });
	report(forget.error?.status === 404, "forgetPassword (the old name) gets 404", json(forget.error ?? forget.data));
	await client.signOut();
}

// ---------------------------------------------------------------------------
// Sessions and the account, through the client's own calls, and what each
// revokes (ACCOUNT_CHECKS=1; the revocations where BUSINESS_URL says).

const ACCOUNT_CHECKS = process.env.ACCOUNT_CHECKS === "1";
const BUSINESS_URL = process.env.BUSINESS_URL ?? "";
const CHANGE_EMAIL = process.env.CHANGE_EMAIL || "mail";
const DELETE_USER = process.env.DELETE_USER === "allowed";

// jarJWT is get-session's JWT for the jar's session.
async function jarJWT() {
	let jwt = null;
	await client.getSession({ fetchOptions: { onSuccess: (ctx) => (jwt = ctx.response.headers.get("set-auth-jwt")) } });
	return jwt;
}

// device signs in outside the jar (another browser) and returns its
// cookie and JWT.
async function device(email, password) {
	const res = await fetch(`${BASE_URL}${BASE_PATH}/sign-in/email`, {
		method: "POST",
		headers: { "content-type": "application/json", origin: ORIGIN },
		body: JSON.stringify({ email, password }),
	});
	const c = res.headers.getSetCookie().map(parseSetCookie).find((c) => c.name === COOKIE_NAME && !c.expired);
	const cookie = c ? `${COOKIE_NAME}=${c.value}` : "";
	const gs = await fetch(`${BASE_URL}${BASE_PATH}/get-session`, { headers: { cookie } });
	return { cookie, jwt: gs.headers.get("set-auth-jwt"), session: (await gs.json())?.session };
}

// business is the status of BUSINESS_URL with jwt, retried until it is
// (or is not) 401 for up to 3 s: a revocation reaches other processes
// within the server's bound.
async function business(jwt, want401) {
	let status = 0;
	for (const deadline = Date.now() + 3000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
		status = (await fetch(BUSINESS_URL, { headers: { authorization: `Bearer ${jwt}` } })).status;
		if ((status === 401) === want401) break;
	}
	return status;
}

async function revoked(name, jwt) {
	if (!BUSINESS_URL) return;
	const s = await business(jwt, true);
	report(s === 401, `${name}: the revoked JWT is refused (401)`, `status=${s}`);
}

async function alive(name, jwt) {
	if (!BUSINESS_URL) return;
	const s = await business(jwt, false);
	report(s !== 401, `${name}: the other JWT still works`, `status=${s}`);
}

async function accounts(stamp, password) {
	if (!ACCOUNT_CHECKS) {
		console.log("SKIP sessions and account - ACCOUNT_CHECKS is not set");
		return;
	}
	const email = `client-account+${stamp}@example.com`;
	const up = await client.signUp.email({ name: "Client Account", email, password });
	report(!up.error, "sign-up of the account", json(up.error ?? "ok"));
	const jwtA = await jarJWT();
	const b = await device(email, password);

	// 20. listSessions: both, in Better Auth's session shape, tokens
	// included; the JWT names its session by id, never by token.
	const list = await client.listSessions();
	const sessions = Array.isArray(list.data) ? list.data : [];
	report(
		!list.error && sessions.length === 2 && sessions.every((s) => typeof s.id === "string" && typeof s.token === "string" && s.userId === up.data?.user?.id && s.expiresAt),
		"listSessions returns the user's two sessions",
		list.error ? `${json(list.error)} ${describe(last("/list-sessions"))}` : clip(json(sessions)),
	);
	if (BUSINESS_URL && b.jwt) {
		const sid = JSON.parse(Buffer.from(b.jwt.split(".")[1], "base64url")).sid;
		report(sid === b.session?.id && !sessions.some((s) => s.token === sid), "the JWT's sid is its session's id, never its token", `sid=${sid}`);
	}

	// 21. revokeSession: the other device's session by its token.
	const rs = await client.revokeSession({ token: sessions.find((s) => s.id === b.session?.id)?.token ?? "" });
	report(!rs.error && rs.data?.status === true, "revokeSession returns {status:true}", json(rs.error ?? rs.data));
	const bAfter = await fetch(`${BASE_URL}${BASE_PATH}/get-session`, { headers: { cookie: b.cookie } });
	report((await bAfter.text()) === "null", "the revoked session's cookie gets null");
	await revoked("revokeSession", b.jwt);
	await alive("revokeSession", jwtA);

	// 22. updateUser.
	const uu = await client.updateUser({ name: "Client Renamed", image: "https://example.com/renamed.png" });
	report(!uu.error && uu.data?.status === true, "updateUser returns {status:true}", json(uu.error ?? uu.data));
	const renamed = await client.getSession();
	report(renamed.data?.user?.name === "Client Renamed" && renamed.data?.user?.image === "https://example.com/renamed.png", "getSession after updateUser shows the new name and image", json(renamed.data?.user));
	const noEmail = await client.updateUser({ email: "x@example.com" });
	report(noEmail.error?.status === 400 && noEmail.error?.code === "EMAIL_CAN_NOT_BE_UPDATED", "updateUser with an email: 400 EMAIL_CAN_NOT_BE_UPDATED", json(noEmail.error ?? noEmail.data));

	// 23. changeEmail of the unverified address.
	const newEmail = `client-moved+${stamp}@example.com`;
	const ce = await client.changeEmail({ newEmail, callbackURL: "/moved" });
	report(!ce.error && ce.data?.status === true, "changeEmail returns {status:true}", json(ce.error ?? ce.data));
	const moved = await client.getSession();
	const want = CHANGE_EMAIL === "immediate" ? newEmail : email;
	report(moved.data?.user?.email === want, `changeEmail of an unverified address: ${CHANGE_EMAIL === "immediate" ? "changed at once" : "unchanged until the link"}`, `email=${moved.data?.user?.email}`);
	const current = moved.data?.user?.email ?? email;

	// 24. revokeOtherSessions: a third device goes, this one stays.
	const c = await device(current, password);
	const ros = await client.revokeOtherSessions();
	report(!ros.error && ros.data?.status === true, "revokeOtherSessions returns {status:true}", json(ros.error ?? ros.data));
	const mine = await client.getSession();
	report(!!mine.data?.session, "the caller's session survives revokeOtherSessions", json(mine.error ?? "ok"));
	await revoked("revokeOtherSessions", c.jwt);
	await alive("revokeOtherSessions", jwtA);

	// 25. changePassword with revokeOtherSessions: every JWT issued up to
	// now goes; the caller goes on with a session (its own, or Better
	// Auth's new one) whose next JWT works.
	const d = await device(current, password);
	const cp = await client.changePassword({ currentPassword: password, newPassword: password + "-changed", revokeOtherSessions: true });
	report(!cp.error && cp.data?.user?.email === current, "changePassword with revokeOtherSessions returns {token,user}", json(cp.error ?? cp.data));
	await revoked("changePassword", d.jwt);
	await revoked("changePassword (the caller's older JWT too)", jwtA);
	const jwtAfter = await jarJWT();
	report(!!jwtAfter, "get-session after changePassword mints a JWT");
	await alive("changePassword (a JWT minted after it)", jwtAfter);

	// 26. revokeSessions: everything, the caller's too.
	const rss = await client.revokeSessions();
	report(!rss.error && rss.data?.status === true, "revokeSessions returns {status:true}", json(rss.error ?? rss.data));
	const none = await client.getSession();
	report(!none.error && none.data === null, "getSession after revokeSessions is null", json(none.error ?? none.data));
	await revoked("revokeSessions", jwtAfter);

	// 27. deleteUser.
	const again = await client.signIn.email({ email: current, password: password + "-changed" });
	report(!again.error, "sign-in after revokeSessions", json(again.error ?? "ok"));
	const lastJWT = await jarJWT();
	const del = await client.deleteUser({ password: password + "-changed" });
	if (DELETE_USER) {
		report(!del.error && del.data?.success === true && del.data?.message === "User deleted", "deleteUser returns {success:true,message:\"User deleted\"}", json(del.error ?? del.data));
		const gone = await client.signIn.email({ email: current, password: password + "-changed" });
		report(gone.error?.status === 401, "sign-in after deleteUser fails", json(gone.error ?? gone.data));
		await revoked("deleteUser", lastJWT);
	} else {
		report(del.error?.status === 404, "deleteUser when not enabled: 404", json(del.error ?? del.data));
	}
}

try {
	const stamp = `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
	await main();
	await recovery(stamp, "correct-horse-battery-staple");
	await accounts(stamp, "correct-horse-battery-staple");
} catch (e) {
	const cause = e?.cause ? ` (cause: ${e.cause.code ?? ""} ${e.cause.message ?? e.cause})` : "";
	report(false, "unexpected exception", `${e?.message ?? e}${cause} at ${BASE_URL}\n${e?.stack ?? ""}`);
}
clearTimeout(watchdog);
summary();
process.exit(failed === 0 && passed > 0 ? 0 : 1);
