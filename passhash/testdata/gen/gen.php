<?php
// Hashes each password given as JSON on stdin with PHP's password_hash
// and its plain digests; prints one JSON object a line: format, password,
// hash, made_by.
$passwords = json_decode(stream_get_contents(STDIN));
$by = 'PHP ' . PHP_VERSION;
function out($format, $password, $hash, $made_by) {
    echo json_encode(['format' => $format, 'password' => $password, 'hash' => $hash, 'made_by' => $made_by], JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES), "\n";
}
foreach ($passwords as $i => $p) {
    // PHP truncates bcrypt passwords at 72 bytes: the long one proves we read them alike.
    out('bcrypt', $p, password_hash($p, PASSWORD_BCRYPT, ['cost' => 4 + $i % 3]), "$by password_hash(PASSWORD_BCRYPT)");
    out('argon2id', $p, password_hash($p, PASSWORD_ARGON2ID, ['memory_cost' => 512, 'time_cost' => 2, 'threads' => 1]), "$by password_hash(PASSWORD_ARGON2ID)");
    out('argon2i', $p, password_hash($p, PASSWORD_ARGON2I, ['memory_cost' => 256, 'time_cost' => 3, 'threads' => 2]), "$by password_hash(PASSWORD_ARGON2I)");
    out('md5', $p, md5($p), "$by md5()");
    out('sha1', $p, sha1($p), "$by sha1()");
    out('sha256', $p, hash('sha256', $p), "$by hash('sha256')");
}
// The defaults, as a PHP application configured nothing.
$p = $passwords[0];
out('bcrypt', $p, password_hash($p, PASSWORD_DEFAULT), "$by password_hash(PASSWORD_DEFAULT), its default cost");
out('argon2id', $p, password_hash($p, PASSWORD_ARGON2ID), "$by password_hash(PASSWORD_ARGON2ID), its default cost");
