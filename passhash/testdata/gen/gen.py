"""Writes passhash/testdata/<format>.json: for each format, passwords and
their hashes made by the libraries that write that format, each vector
naming the library and version that made it. Run through gen.sh.

usage: gen.py GEN_PHP GEN_MJS OUTDIR
"""

import base64
import hashlib
import json
import os
import subprocess
import sys

import argon2
import bcrypt
import django
import passlib
from django.conf import settings

settings.configure(PASSWORD_HASHERS=[
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.SHA1PasswordHasher",
    "django.contrib.auth.hashers.UnsaltedMD5PasswordHasher",
    "django.contrib.auth.hashers.UnsaltedSHA1PasswordHasher",
])
django.setup()
from django.contrib.auth.hashers import get_hasher, make_password  # noqa: E402
from passlib import hash as ph  # noqa: E402

# The passwords: plain, empty, non-ASCII, longer than bcrypt's 72 bytes,
# and one whose NFKC form differs (U+FB01, the "fi" ligature: only the
# sidecar's own format normalizes).
PASSWORDS = [
    "correct horse battery staple",
    "",
    "pässwörd ✓ 密码",
    "long-" + "0123456789" * 9 + "-end",
    "\ufb01ne print",
]

vectors = []


def add(fmt, password, h, made_by):
    vectors.append({"format": fmt, "password": password, "hash": h, "made_by": made_by})


py = "Python %d.%d" % sys.version_info[:2]
pl = "passlib %s (%s)" % (passlib.__version__, py)
dj = "Django %s (%s)" % (django.get_version(), py)

for i, p in enumerate(PASSWORDS):
    add("bcrypt", p, ph.bcrypt.using(rounds=4, ident="2a").hash(p), pl + " bcrypt ident 2a, backend bcrypt " + bcrypt.__version__)
    add("bcrypt", p, ph.bcrypt.using(rounds=5, ident="2b").hash(p), pl + " bcrypt ident 2b, backend bcrypt " + bcrypt.__version__)
    add("argon2id", p, ph.argon2.using(type="ID", memory_cost=256, rounds=2, parallelism=2).hash(p), pl + " argon2 type ID, backend argon2-cffi " + argon2.__version__)
    add("argon2i", p, ph.argon2.using(type="I", memory_cost=128, rounds=3, parallelism=1).hash(p), pl + " argon2 type I, backend argon2-cffi " + argon2.__version__)
    add("argon2id", p, argon2.PasswordHasher(time_cost=1, memory_cost=1024, parallelism=4).hash(p), "argon2-cffi %s PasswordHasher (%s)" % (argon2.__version__, py))
    add("scrypt-phc", p, ph.scrypt.using(rounds=10, block_size=8, parallelism=1 + i % 2).hash(p), pl + " scrypt")
    add("passlib-pbkdf2-sha256", p, ph.pbkdf2_sha256.using(rounds=1000 + i).hash(p), pl + " pbkdf2_sha256")
    add("passlib-pbkdf2-sha512", p, ph.pbkdf2_sha512.using(rounds=1000 + i, salt_size=8 + i).hash(p), pl + " pbkdf2_sha512")
    add("phpass", p, ph.phpass.using(ident="P", rounds=8 + i).hash(p), pl + " phpass ident P")
    add("phpass", p, ph.phpass.using(ident="H", rounds=7 + i).hash(p), pl + " phpass ident H")
    add("django-pbkdf2-sha256", p, get_hasher("pbkdf2_sha256").encode(p, get_hasher("pbkdf2_sha256").salt(), iterations=1000 + i), dj + " PBKDF2PasswordHasher")
    add("django-pbkdf2-sha1", p, get_hasher("pbkdf2_sha1").encode(p, get_hasher("pbkdf2_sha1").salt(), iterations=1000 + i), dj + " PBKDF2SHA1PasswordHasher")
    add("md5-salted", p, make_password(p, hasher="md5"), dj + " MD5PasswordHasher")
    add("sha1-salted", p, make_password(p, hasher="sha1"), dj + " SHA1PasswordHasher")
    add("md5", p, make_password(p, hasher="unsalted_md5"), dj + " UnsaltedMD5PasswordHasher")
    add("sha1-salted", p, make_password(p, hasher="unsalted_sha1"), dj + " UnsaltedSHA1PasswordHasher (sha1$$hex)")
    add("md5", p, ph.hex_md5.hash(p), pl + " hex_md5")
    add("sha1", p, ph.hex_sha1.hash(p), pl + " hex_sha1")
    add("sha256", p, ph.hex_sha256.hash(p), pl + " hex_sha256")
    # No library writes "sha256$salt$hex": it is the sidecar's spelling of
    # Django's salted recipe over SHA-256.
    salt = base64.b32encode(os.urandom(10)).decode().lower()
    add("sha256-salted", p, "sha256$%s$%s" % (salt, hashlib.sha256((salt + p).encode()).hexdigest()), "gen.py hashlib.sha256 (%s): the recipe, no system writes it" % py)

# What each writes when configured with nothing.
p = PASSWORDS[0]
add("django-pbkdf2-sha256", p, make_password(p), dj + " make_password, its default iterations")
add("passlib-pbkdf2-sha256", p, ph.pbkdf2_sha256.hash(p), pl + " pbkdf2_sha256, its default rounds")
add("scrypt-phc", p, ph.scrypt.hash(p), pl + " scrypt, its default cost")
add("phpass", p, ph.phpass.hash(p), pl + " phpass, its default rounds")

# ASP.NET Identity: no .NET here. The vectors published in Microsoft's
# own test suite (dotnet/aspnetcore, src/Identity/test/Identity.Test/
# PasswordHasherTest.cs at 03741a0a53c95e382c351bc9a2ae0796aded4fa7),
# all for "my password".
ms = "Microsoft's PasswordHasherTest.cs (dotnet/aspnetcore 03741a0a): "
for fmt, h, what in [
    ("aspnet-identity-v2", "AAABAgMEBQYHCAkKCwwNDg+ukCEMDf0yyQ29NYubggHIVY0sdEUfdyeM+E1LtH1uJg==", "HashPassword_Version2"),
    ("aspnet-identity-v2", "ANXrDknc7fGPpigibZXXZFMX4aoqz44JveK6jQuwY3eH/UyPhvr5xTPeGYEckLxz9A==", "SHA1, 1000 iterations, 128-bit salt, 256-bit subkey"),
    ("aspnet-identity-v3", "AQAAAAEAACcQAAAAEAABAgMEBQYHCAkKCwwNDg+yWU7rLgUwPZb1Itsmra7cbxw2EFpwpVFIEtP+JIuUEw==", "HashPassword_Version3: SHA256, 10000 iterations"),
    ("aspnet-identity-v3", "AQAAAAIAAAAyAAAAEOMwvh3+FZxqkdMBz2ekgGhwQ4B6pZWND6zgESBuWiHw", "SHA512, 50 iterations, 128-bit salt, 128-bit subkey"),
    ("aspnet-identity-v3", "AQAAAAIAAAD6AAAAIJbVi5wbMR+htSfFp8fTw8N8GOS/Sje+S/4YZcgBfU7EQuqv4OkVYmc4VJl9AGZzmRTxSkP7LtVi9IWyUxX8IAAfZ8v+ZfhjCcudtC1YERSqE1OEdXLW9VukPuJWBBjLuw==", "SHA512, 250 iterations, 256-bit salt, 512-bit subkey"),
    ("aspnet-identity-v3", "AQAAAAAAAAD6AAAAEAhftMyfTJylOlZT+eEotFXd1elee8ih5WsjXaR3PA9M", "SHA1, 250 iterations, 128-bit salt, 128-bit subkey"),
    ("aspnet-identity-v3", "AQAAAAEAA9CQAAAAIESkQuj2Du8Y+kbc5lcN/W/3NiAZFEm11P27nrSN5/tId+bR1SwV8CO1Jd72r4C08OLvplNlCDc3oQZ8efcW+jQ=", "SHA256, 250000 iterations, 256-bit salt, 256-bit subkey"),
]:
    add(fmt, "my password", h, ms + what)


# ASP.NET Core 7+'s default (v3, HMAC-SHA512, 100,000 iterations, 16-byte
# salt, 32-byte key) for the other passwords: built here from the layout
# PasswordHasher.cs documents, with hashlib, not by .NET.
def aspnet_v3(password, prf, iterations, salt_len, key_len):
    salt = os.urandom(salt_len)
    name = {0: "sha1", 1: "sha256", 2: "sha512"}[prf]
    key = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations, key_len)
    head = bytes([1]) + prf.to_bytes(4, "big") + iterations.to_bytes(4, "big") + salt_len.to_bytes(4, "big")
    return base64.b64encode(head + salt + key).decode()


for p in PASSWORDS:
    add("aspnet-identity-v3", p, aspnet_v3(p, 2, 100000, 16, 32), "gen.py hashlib.pbkdf2_hmac (%s) in PasswordHasher.cs's v3 layout, .NET 7+'s defaults: not made by .NET" % py)


def run(cmd):
    res = subprocess.run(cmd, input=json.dumps(PASSWORDS), capture_output=True, text=True, check=True)
    for line in res.stdout.splitlines():
        v = json.loads(line)
        add(v["format"], v["password"], v["hash"], v["made_by"])


run(["php", sys.argv[1]])
run(["node", sys.argv[2]])

out = sys.argv[3]
by_format = {}
for v in vectors:
    by_format.setdefault(v.pop("format"), []).append(v)
for fmt, vs in sorted(by_format.items()):
    with open(os.path.join(out, fmt + ".json"), "w") as f:
        json.dump({"format": fmt, "generator": "testdata/gen/gen.sh", "vectors": vs}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("%s: %d vectors" % (fmt, len(vs)))
