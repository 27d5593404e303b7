// authsidecar's browser client, served at GET /api/auth/client.js.
// Contract: login and sign-up await get-session before resolving (§3 rule 1);
// the JWT from set-auth-jwt lives in localStorage "authToken" and goes out as
// Authorization: Bearer (§5.8), or as ?token= on WebSockets (§5.9).
// No dependencies; types in authclient.d.ts.

const TOKEN_KEY = "authToken";

export class AuthError extends Error {
  constructor(status, code, message, options) {
    super(message, options);
    this.name = "AuthError";
    this.status = status;
    this.code = code;
  }
}

export function createAuthClient(options = {}) {
  const storage = options.storage ?? globalThis.localStorage;
  const send = options.fetch ?? ((...a) => globalThis.fetch(...a));
  const base = String(options.baseURL ?? globalThis.location.origin).replace(/\/+$/, "");
  const onUnauthorized = options.onUnauthorized;
  let refreshing = null;

  const url = (path) => {
    if (typeof path !== "string" || !path.startsWith("/") || path.startsWith("//")) {
      // Never send the token anywhere but baseURL.
      throw new TypeError(`path must start with a single "/": ${path}`);
    }
    return base + path;
  };

  const token = () => storage.getItem(TOKEN_KEY);

  // call sends a request to /api/auth with the session cookie; errors
  // become AuthError from the sidecar's {message, code}.
  async function call(method, path, body) {
    let res;
    try {
      res = await send(url(path), {
        method,
        credentials: "include",
        headers: body === undefined ? {} : { "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new AuthError(0, "NETWORK_ERROR",
        `${method} ${path} failed (network, or CORS: is this origin in auth.trusted_origins?)`, { cause: err });
    }
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
    if (!res.ok) {
      throw new AuthError(res.status, data?.code ?? `HTTP_${res.status}`, data?.message ?? (res.statusText || `HTTP ${res.status}`));
    }
    return { res, data };
  }

  const post = async (path, body) => (await call("POST", path, body)).data;

  // getSession asks for a fresh JWT with the cookie and stores it.
  // Resolves {session, user, token}, or null without a live session.
  async function getSession() {
    const { res, data } = await call("GET", "/api/auth/get-session");
    if (!data) return null;
    const jwt = res.headers.get("set-auth-jwt");
    if (jwt) storage.setItem(TOKEN_KEY, jwt);
    return { ...data, token: jwt };
  }

  // login runs step one, then awaits get-session (step two) so that the
  // token is stored before the caller redirects.
  async function login(path, body) {
    await call("POST", path, body);
    const s = await getSession();
    if (!s?.token) {
      throw new AuthError(0, "NO_JWT",
        "signed in, but no readable set-auth-jwt header: CORS must expose it to this origin (auth.trusted_origins)");
    }
    return s;
  }

  // refresh shares one get-session among concurrent 401s.
  function refresh() {
    refreshing ??= getSession().then((s) => s?.token ?? null, () => null)
      .finally(() => { refreshing = null; });
    return refreshing;
  }

  async function authFetch(path, init = {}) {
    const target = url(path);
    const attempt = () => {
      const headers = new Headers(init.headers);
      const t = token();
      if (t) headers.set("Authorization", `Bearer ${t}`);
      return send(target, { ...init, headers });
    };
    let res = await attempt();
    if (res.status !== 401) return res;
    // The JWT is missing, expired or from rotated keys: one retry if the
    // cookie still yields a fresh one, else hand over to the app's login.
    if (await refresh()) {
      res = await attempt();
      if (res.status !== 401) return res;
    }
    onUnauthorized?.(res);
    return res;
  }

  function webSocket(path, protocols) {
    const u = new URL(url(path));
    u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
    const t = token();
    if (t) u.searchParams.set("token", t);
    const WS = options.WebSocket ?? globalThis.WebSocket;
    return new WS(u.href, protocols);
  }

  return {
    signUp: ({ name, email, password }) => login("/api/auth/sign-up/email", { name, email, password }),
    signIn: ({ email, password }) => login("/api/auth/sign-in/email", { email, password }),
    async signOut() {
      try {
        await call("POST", "/api/auth/sign-out", {});
      } finally {
        storage.removeItem(TOKEN_KEY);
      }
    },
    // Account recovery: Better Auth's paths and JSON bodies.
    requestPasswordReset: ({ email, redirectTo }) => post("/api/auth/request-password-reset", { email, redirectTo }),
    // A reset ends the user's cookie sessions: forget the JWT as signOut does.
    resetPassword: ({ newPassword, token }) => post("/api/auth/reset-password", { newPassword, token })
      .then((d) => { storage.removeItem(TOKEN_KEY); return d; }),
    sendVerificationEmail: ({ email, callbackURL }) => post("/api/auth/send-verification-email", { email, callbackURL }),
    // A valid link may sign the user in (auth.sign_in_after_verification),
    // so this then awaits get-session: null when it did not.
    async verifyEmail({ token, callbackURL }) {
      const q = new URLSearchParams({ token });
      if (callbackURL !== undefined) q.set("callbackURL", callbackURL);
      const { res } = await call("GET", "/api/auth/verify-email?" + q);
      // With callbackURL the answer is a redirect, which fetch follows; a
      // refused link lands there with ?error=CODE.
      const code = res.redirected && new URL(res.url).searchParams.get("error");
      if (code) throw new AuthError(401, code, "verification link refused");
      return getSession();
    },
    // Sign in with an identity provider (identity_providers): the sidecar
    // answers the provider's sign-in URL and the browser goes there. The
    // provider sends it back to callbackURL with the session cookie set;
    // the page there calls getSession() for the JWT. A refused sign-in
    // lands on errorCallbackURL with ?error=<code>.
    async signInSocial({ provider, callbackURL, errorCallbackURL, newUserCallbackURL }) {
      const data = await post("/api/auth/sign-in/social", { provider, callbackURL, errorCallbackURL, newUserCallbackURL });
      if (data?.url && data.redirect !== false) {
        const go = options.navigate ?? ((u) => { globalThis.location.href = u; });
        go(data.url);
      }
      return data;
    },
    getSession,
    fetch: authFetch,
    webSocket,
    token,
  };
}
