// A real Better Auth 1.7.25 application whose database authsidecar takes
// over (cmd/authsidecar TestImportBetterAuth, docs/migration.md): email
// and password, the admin plugin (roles, bans), the jwt() plugin (EdDSA
// keys encrypted with the secret), and, when OIDC_ISSUER is set, the
// generic OAuth plugin signing in with provider "corp", its tokens
// encrypted (account.encryptOAuthTokens). Better Auth's own migrations
// make the schema on start: what its CLI's migrate would make.
//
// Env: DATABASE ("postgres://…" through pg, or "sqlite:PATH" through
// better-sqlite3; required), PORT (0 picks a free port; default 0),
// BASE_URL (default http://localhost:<port>), BETTER_AUTH_SECRET (default
// a fixed test secret), OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET.
// Besides /api/auth/*, POST /test/create-user makes a user with roles the
// way an application's server code does (auth.api.createUser, the admin
// plugin's, called without a request). Listens on 127.0.0.1 and prints
// one line on stdout once it serves: "LISTENING <port>".
import http from "node:http";
import { betterAuth } from "better-auth";
import { getMigrations } from "better-auth/db/migration";
import { toNodeHandler } from "better-auth/node";
import { admin, genericOAuth, jwt } from "better-auth/plugins";

const env = process.env;

async function database(spec) {
	if (spec?.startsWith("postgres")) {
		const { Pool } = (await import("pg")).default;
		return new Pool({ connectionString: spec });
	}
	if (spec?.startsWith("sqlite:")) {
		const Database = (await import("better-sqlite3")).default;
		return new Database(spec.slice("sqlite:".length));
	}
	throw new Error("DATABASE: want postgres://… or sqlite:PATH");
}

const db = await database(env.DATABASE);
const server = http.createServer();
server.listen(Number(env.PORT || 0), "127.0.0.1", async () => {
	const port = server.address().port;
	const plugins = [admin(), jwt({ jwt: { expirationTime: "30d" } })];
	if (env.OIDC_ISSUER) {
		plugins.push(genericOAuth({
			config: [{
				providerId: "corp",
				discoveryUrl: `${env.OIDC_ISSUER}/.well-known/openid-configuration`,
				clientId: env.OIDC_CLIENT_ID,
				clientSecret: env.OIDC_CLIENT_SECRET,
				scopes: ["openid", "email", "profile", "offline_access"],
				pkce: true,
			}],
		}));
	}
	const options = {
		database: db,
		baseURL: env.BASE_URL || `http://localhost:${port}`,
		basePath: "/api/auth",
		secret: env.BETTER_AUTH_SECRET || "betterauth-takeover-test-secret-0123456789abcdef",
		telemetry: { enabled: false },
		emailAndPassword: { enabled: true },
		account: { encryptOAuthTokens: true },
		plugins,
	};
	const { runMigrations } = await getMigrations(options);
	await runMigrations();
	const auth = betterAuth(options);
	const authHandler = toNodeHandler(auth);
	server.on("request", async (req, res) => {
		if (req.method === "POST" && req.url === "/test/create-user") {
			let body = "";
			for await (const chunk of req) body += chunk;
			try {
				const out = await auth.api.createUser({ body: JSON.parse(body) });
				res.writeHead(200, { "content-type": "application/json" });
				res.end(JSON.stringify(out));
			} catch (e) {
				res.writeHead(500, { "content-type": "text/plain" });
				res.end(String(e?.message || e));
			}
			return;
		}
		authHandler(req, res);
	});
	process.stdout.write(`LISTENING ${port}\n`);
});
process.on("SIGTERM", async () => {
	server.close();
	await (db.end?.() ?? db.close?.());
	process.exit(0);
});
