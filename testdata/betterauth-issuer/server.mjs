// A real Better Auth 1.7.25 server as an external JWT issuer for
// authsidecar's verifier mode (jwks/betterauth_test.go): memory adapter,
// email and password, the jwt() plugin with its default EdDSA (Ed25519)
// keys and 30-day tokens. JWKS at {BASE_URL}/api/auth/jwks; a JWT from
// GET {BASE_URL}/api/auth/token (session cookie) or the set-auth-jwt header
// of GET {BASE_URL}/api/auth/get-session; iss = aud = BASE_URL's origin.
//
// Env: PORT (0 picks a free port; default 0), BASE_URL (default
// http://localhost:<the port listened on>), BETTER_AUTH_SECRET (default a
// fixed test secret). Listens on 127.0.0.1 and prints exactly one line on
// stdout once it serves: "LISTENING <port>".
import http from "node:http";
import { betterAuth } from "better-auth";
import { memoryAdapter } from "better-auth/adapters/memory";
import { toNodeHandler } from "better-auth/node";
import { jwt } from "better-auth/plugins";

const env = process.env;
const server = http.createServer();

// The base URL may need the port, which PORT=0 only tells once listening:
// Better Auth is built then, before the LISTENING line lets anyone in.
server.listen(Number(env.PORT || 0), "127.0.0.1", () => {
	const port = server.address().port;
	const auth = betterAuth({
		database: memoryAdapter({ user: [], session: [], account: [], verification: [], jwks: [] }),
		baseURL: env.BASE_URL || `http://localhost:${port}`,
		basePath: "/api/auth",
		secret: env.BETTER_AUTH_SECRET || "betterauth-issuer-test-secret-0123456789abcdef",
		telemetry: { enabled: false },
		emailAndPassword: { enabled: true },
		plugins: [jwt({ jwt: { expirationTime: "30d" } })],
	});
	server.on("request", toNodeHandler(auth));
	process.stdout.write(`LISTENING ${port}\n`);
});
