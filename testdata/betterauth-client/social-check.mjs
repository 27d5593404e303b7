// social-check.mjs drives authsidecar's sign-in with an identity provider
// with Better Auth's own browser client (better-auth/client + jwtClient), as
// a web app does: signIn.social -> the provider's login -> the callback ->
// getSession -> the JWT -> a business call with it.
//
// Environment:
//   BASE_URL     the sidecar's root, e.g. http://127.0.0.1:18080 (required)
//   PROVIDER     the provider id (default corp)
//   OP_USERNAME, OP_PASSWORD  the user at the provider, whose login form is
//                zitadel's example OP's (GET auth URL -> /login/username form ->
//                POST -> /authorize/callback -> the sidecar's callback)
//
// Output: "PASS <name> - detail" / "FAIL <name> - detail" lines, then
// "N passed, M failed". Exit 0 only if nothing failed.

import { createAuthClient } from "better-auth/client";
import { jwtClient } from "better-auth/client/plugins";
import { createRemoteJWKSet, jwtVerify } from "jose";

const BASE_URL = (process.env.BASE_URL ?? "").replace(/\/+$/, "");
const PROVIDER = process.env.PROVIDER || "corp";
const ORIGIN = new URL(BASE_URL || "http://invalid").origin;
let passed = 0;
let failed = 0;
function report(ok, name, detail = "") {
	if (ok) passed++;
	else failed++;
	console.log(`${ok ? "PASS" : "FAIL"} ${name}${detail ? " - " + detail : ""}`);
	return ok;
}
const watchdog = setTimeout(() => {
	report(false, "timeout", "did not finish within 30s");
	console.log(`${passed} passed, ${failed} failed`);
	process.exit(1);
}, 30_000);

// A cookie jar for the sidecar's origin, and Origin on non-GET requests, as
// a browser sends them.
const jar = new Map();
async function jarFetch(input, init = {}) {
	const url = new URL(input instanceof Request ? input.url : String(input));
	const method = (init.method || (input instanceof Request ? input.method : "GET")).toUpperCase();
	const headers = new Headers(init.headers || (input instanceof Request ? input.headers : undefined));
	if (url.origin === ORIGIN && jar.size > 0) headers.set("cookie", [...jar].map(([k, v]) => `${k}=${v}`).join("; "));
	if (method !== "GET" && method !== "HEAD" && !headers.has("origin")) headers.set("origin", ORIGIN);
	const res = await fetch(input, { ...init, method, headers });
	if (url.origin === ORIGIN) {
		for (const line of res.headers.getSetCookie()) {
			const [pair, ...attrs] = line.split(";");
			const i = pair.indexOf("=");
			const name = pair.slice(0, i).trim();
			const expired = attrs.some((a) => /^\s*max-age=(0|-)/i.test(a));
			if (expired) jar.delete(name);
			else jar.set(name, pair.slice(i + 1).trim());
		}
	}
	return res;
}

const client = createAuthClient({ baseURL: BASE_URL, plugins: [jwtClient()], fetchOptions: { customFetchImpl: jarFetch } });

// login signs in at the provider as a browser would and returns the URL it
// sends the browser back to (the sidecar's callback with code and state).
async function login(authURL) {
	let next = authURL;
	for (let i = 0; i < 10; i++) {
		if (next.startsWith(BASE_URL + "/api/auth/callback/")) return next;
		let res;
		if (next.includes("/login/username")) {
			const id = new URL(next).searchParams.get("authRequestID");
			res = await fetch(new URL("/login/username", next), {
				method: "POST", redirect: "manual",
				headers: { "content-type": "application/x-www-form-urlencoded" },
				body: new URLSearchParams({ id, username: process.env.OP_USERNAME, password: process.env.OP_PASSWORD }),
			});
		} else {
			res = await fetch(next, { redirect: "manual" });
		}
		const loc = res.headers.get("location");
		if (!loc) throw new Error(`${next}: status ${res.status} without a redirect`);
		next = new URL(loc, next).href;
	}
	throw new Error("too many redirects at the provider");
}

async function main() {
	// Errors first: they change nothing.
	const unknown = await client.signIn.social({ provider: "no-such-provider", callbackURL: "/dashboard" });
	report(unknown.error?.status === 404 && unknown.error?.code === "PROVIDER_NOT_FOUND", "unknown provider: 404 PROVIDER_NOT_FOUND", JSON.stringify(unknown.error));
	const evil = await client.signIn.social({ provider: PROVIDER, callbackURL: "https://evil.example/x" });
	report(evil.error?.status === 403 && evil.error?.code === "INVALID_CALLBACK_URL", "open redirect: 403 INVALID_CALLBACK_URL", JSON.stringify(evil.error));

	// 1. signIn.social: {url, redirect:true} and the state cookie.
	const start = await client.signIn.social({ provider: PROVIDER, callbackURL: "/dashboard", newUserCallbackURL: "/welcome", errorCallbackURL: "/login-error" });
	const url = start.data?.url;
	report(typeof url === "string" && start.data?.redirect === true, "signIn.social returns {url, redirect:true}", JSON.stringify(start.error ?? start.data));
	report(jar.has("auth.state"), "signIn.social sets the auth.state cookie", [...jar.keys()].join(","));
	const u = new URL(url);
	report(u.searchParams.get("code_challenge_method") === "S256" && !!u.searchParams.get("nonce") && u.searchParams.get("redirect_uri") === `${BASE_URL}/api/auth/callback/${PROVIDER}`,
		"the authorization URL carries PKCE S256, a nonce and Better Auth's redirect_uri", url);

	// 2. The provider's login, then its redirect back to the callback.
	const cb = await login(url);
	const res = await jarFetch(cb, { redirect: "manual" });
	report(res.status === 302 && res.headers.get("location") === "/welcome", "callback: 302 to newUserCallbackURL", `${res.status} ${res.headers.get("location")}`);
	report(jar.has("auth.session_token") && !jar.has("auth.state"), "callback: session cookie set, state cookie expired", [...jar.keys()].join(","));

	// 3. getSession hands out the JWT, as after a password sign-in.
	let jwt = null;
	const sess = await client.getSession({ fetchOptions: { onSuccess: (ctx) => { jwt = ctx.response.headers.get("set-auth-jwt"); } } });
	report(!!sess.data?.user?.id && !!jwt, "getSession returns the user and set-auth-jwt", JSON.stringify(sess.error ?? sess.data?.user));
	const { payload } = await jwtVerify(jwt, createRemoteJWKSet(new URL(BASE_URL + "/api/auth/jwks")), { issuer: ORIGIN, audience: ORIGIN, algorithms: ["EdDSA"] });
	report(payload.sub === sess.data.user.id, "the JWT verifies against /api/auth/jwks and names the user", `sub=${payload.sub}`);

	// 4. A business call with the JWT.
	const biz = await fetch(BASE_URL + "/api/tasks", { headers: { authorization: `Bearer ${jwt}` } });
	const body = await biz.text();
	report(biz.status === 200 && body.includes(sess.data.user.id), "a business call with the JWT reaches the app as the user", `${biz.status} ${body.slice(0, 200)}`);

	// 5. listAccounts shows the provider account, no token.
	const accts = await client.listAccounts();
	report(accts.data?.some((a) => a.providerId === PROVIDER && typeof a.accountId === "string") && !JSON.stringify(accts.data).includes("Token"),
		"listAccounts shows the provider account without tokens", JSON.stringify(accts.error ?? accts.data));

	// 6. The same callback again: spent.
	const replay = await jarFetch(cb, { redirect: "manual" });
	report(replay.status === 302 && /error=state_mismatch/.test(replay.headers.get("location") ?? ""), "a replayed callback: error=state_mismatch", replay.headers.get("location"));
}

try {
	await main();
} catch (e) {
	report(false, "unexpected exception", `${e?.message ?? e}\n${e?.stack ?? ""}`);
}
clearTimeout(watchdog);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
