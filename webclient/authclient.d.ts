// Types for authclient.js, the browser client authsidecar serves at
// GET /api/auth/client.js.

/** The user as the sidecar returns it (Better Auth's shape). */
export interface User {
  id: string;
  name: string;
  email: string;
  emailVerified: boolean;
  image?: string | null;
  createdAt: string;
  updatedAt: string;
}

/** The cookie session behind the JWT. */
export interface Session {
  id: string;
  /** The cookie session's own token (not the JWT). */
  token: string;
  userId: string;
  expiresAt: string;
  createdAt: string;
  updatedAt: string;
  ipAddress: string;
  userAgent: string;
}

/** What signUp, signIn and getSession resolve to. */
export interface SessionResult {
  session: Session;
  user: User;
  /** The JWT from the set-auth-jwt header, also stored in localStorage "authToken". */
  token: string | null;
}

/** Rejections carry the sidecar's JSON error {message, code} and the HTTP status. */
export declare class AuthError extends Error {
  name: "AuthError";
  /** HTTP status; 0 when no response could be read (network error or CORS refusal). */
  status: number;
  /**
   * The sidecar's code ("INVALID_EMAIL_OR_PASSWORD", "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL",
   * "INVALID_ORIGIN", ...), or "NETWORK_ERROR", "NO_JWT" (signed in but set-auth-jwt was not
   * readable: the page's origin is missing from auth.trusted_origins), "HTTP_<status>".
   */
  code: string;
}

/** The part of the Web Storage API the client uses. */
export interface TokenStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export interface AuthClientOptions {
  /** The sidecar's origin, e.g. "https://app.example.com". Default: location.origin. */
  baseURL?: string;
  /**
   * Called when a request made with client.fetch stays 401 after one retry with a fresh
   * get-session (or the cookie session is gone): send the user to the login page.
   */
  onUnauthorized?: (response: Response) => void;
  /** Where "authToken" is kept. Default: localStorage. */
  storage?: TokenStorage;
  /** The fetch to use. Default: globalThis.fetch. */
  fetch?: typeof fetch;
  /** The WebSocket constructor to use. Default: globalThis.WebSocket. */
  WebSocket?: typeof WebSocket;
  /** How signInSocial sends the browser to the provider. Default: location.href = url. */
  navigate?: (url: string) => void;
}

export interface AuthClient {
  /** Creates the account, then awaits get-session: the JWT is stored when this resolves. */
  signUp(input: { name: string; email: string; password: string }): Promise<SessionResult>;
  /** Signs in (cookie), then awaits get-session: the JWT is stored when this resolves. */
  signIn(input: { email: string; password: string }): Promise<SessionResult>;
  /** Ends the cookie session and removes localStorage "authToken" (even if the request fails). */
  signOut(): Promise<void>;
  /**
   * Asks for a password-reset link (POST /api/auth/request-password-reset). Resolves
   * {status: true, message} whether or not the address has an account; the link is mailed.
   * redirectTo (a path, or a URL on a trusted origin) is where the link lands, with ?token=
   * or ?error=INVALID_TOKEN; without it the link lands on the sidecar's own reset page.
   * Rejects with INVALID_REDIRECT_URL (403) for any other redirectTo.
   */
  requestPasswordReset(input: { email: string; redirectTo?: string }): Promise<{ status: true; message: string }>;
  /**
   * Sets a new password with the token from a reset link (POST /api/auth/reset-password).
   * The sidecar ends the user's cookie sessions (by default), so the stored JWT is removed
   * too; sign in again with the new password. Rejects with INVALID_TOKEN (400: unknown,
   * used, replaced or expired link), PASSWORD_TOO_SHORT or PASSWORD_TOO_LONG.
   */
  resetPassword(input: { newPassword: string; token: string }): Promise<{ status: true }>;
  /**
   * Mails a verification link (POST /api/auth/send-verification-email). callbackURL (a path,
   * or a URL on a trusted origin) is where the link sends the browser, signed in; default "/".
   * Without a session every address gets the same answer; signed in, the address must be the
   * session's (else EMAIL_MISMATCH, 400) and not yet verified (else EMAIL_ALREADY_VERIFIED, 400).
   * A callbackURL elsewhere: INVALID_CALLBACK_URL (403).
   */
  sendVerificationEmail(input: { email: string; callbackURL?: string }): Promise<{ status: true }>;
  /**
   * Spends a verification token (GET /api/auth/verify-email?token=). A valid link marks the
   * address verified; where the sidecar lets a link sign in (auth.sign_in_after_verification,
   * off by default) it also starts a cookie session in a browser that has none. So this then
   * awaits get-session and stores the JWT, as signIn does: it resolves to the browser's
   * session, or null when there is none (by default: the user signs in next). Rejects with
   * INVALID_TOKEN (401) for an unknown, used, replaced or expired link. With callbackURL
   * the sidecar answers with a redirect, which fetch follows (an error comes back as
   * ?error=CODE there and still rejects): use it only when the page, the sidecar and
   * callbackURL share one origin, since a cross-origin redirect fails CORS (NETWORK_ERROR)
   * after the token is spent. The mailed links need callbackURL; a page that already holds
   * the token does not.
   */
  verifyEmail(input: { token: string; callbackURL?: string }): Promise<SessionResult | null>;
  /**
   * Signs in with an identity provider of identity_providers (POST /api/auth/sign-in/social,
   * Better Auth's wire) and sends the browser to it. The provider sends the browser back to
   * callbackURL (default: the sidecar's origin) with the session cookie set, or newUserCallbackURL
   * for a first sign-in; the page there calls getSession() for the JWT. A refused sign-in lands
   * on errorCallbackURL (default /api/auth/error) with ?error=<code> (access_denied,
   * account_not_linked, signup_disabled, ...). Each URL is a path or on a trusted origin, else
   * this rejects with INVALID_CALLBACK_URL (403) and its kin; an unknown provider rejects with
   * PROVIDER_NOT_FOUND (404). Resolves to the sidecar's answer once navigation has begun.
   */
  signInSocial(input: {
    provider: string;
    callbackURL?: string;
    errorCallbackURL?: string;
    newUserCallbackURL?: string;
  }): Promise<{ url: string; redirect: boolean }>;
  /** Fetches a fresh JWT with the cookie and stores it; null without a live session. */
  getSession(): Promise<SessionResult | null>;
  /**
   * fetch(baseURL + path) with Authorization: Bearer <token>. On a 401 it retries once after
   * a fresh get-session, else calls onUnauthorized; it resolves with the Response either way.
   * path must start with "/". A ReadableStream body cannot be sent twice: use a string,
   * Blob or FormData when the retry matters.
   */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** new WebSocket to baseURL + path (ws:, or wss: when baseURL is https) with ?token=<JWT>. */
  webSocket(path: string, protocols?: string | string[]): WebSocket;
  /** The stored JWT, or null. */
  token(): string | null;
}

export declare function createAuthClient(options?: AuthClientOptions): AuthClient;
