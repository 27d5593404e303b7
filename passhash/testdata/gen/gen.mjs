// Hashes each password given as JSON on stdin with Better Auth's own
// hashPassword (scrypt, "saltHex:keyHex") and bcryptjs; prints one JSON
// object a line: format, password, hash, made_by.
import { readFileSync } from "node:fs";
import { hashPassword } from "better-auth/crypto";
import bcrypt from "bcryptjs";

const version = (pkg) => JSON.parse(readFileSync(new URL(`./node_modules/${pkg}/package.json`, import.meta.url))).version;
const passwords = JSON.parse(readFileSync(0, "utf8"));
const out = (format, password, hash, made_by) => console.log(JSON.stringify({ format, password, hash, made_by }));
for (const [i, p] of passwords.entries()) {
  out("scrypt", p, await hashPassword(p), `better-auth ${version("better-auth")} hashPassword (Node ${process.versions.node})`);
  out("bcrypt", p, bcrypt.hashSync(p, 4 + (i % 2)), `bcryptjs ${version("bcryptjs")} hashSync`);
}
