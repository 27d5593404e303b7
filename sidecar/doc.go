// Package sidecar is the running authsidecar: it builds the whole request
// path from one config (the store, the signing keys, the issuer behind
// /api/auth/*, the key cache and verifier, the proxy in front of the
// upstream, the outbox worker and the metrics), serves it on a public
// listener with the operator endpoints on an admin one, applies a changed
// config file while serving, and stops in order.
//
// It is the only package that knows every other: it maps the config onto
// each package's options (issuer.Options, proxy.Options, ...), so a config
// change stops here. Command authsidecar is a thin CLI around it (flags,
// signals, systemd notify, the admin commands):
//
//	s, err := sidecar.New(ctx, sidecar.Options{Config: cfg, Secret: secret})
//	if err != nil { ... }
//	go func() { for range hup { s.Reload() } }()
//	err = s.Run(ctx) // until ctx ends, then drained in order
//
// What a reload may change lives in a generation (stack.go), swapped whole
// and atomically: a request is served to its end by the generation in
// force when it arrived.
package sidecar
