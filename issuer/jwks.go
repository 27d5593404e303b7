package issuer

import "net/http"

// jwkJSON is one published key. Only public members, ever.
type jwkJSON struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
}

// jwks publishes the usable public keys (docs/protocol.md).
func (iss *Issuer) jwks(w http.ResponseWriter, r *http.Request) *apiError {
	keys, err := iss.keys.publicKeys(r.Context())
	if err != nil {
		return storeErr(err)
	}
	out := struct {
		Keys []jwkJSON `json:"keys"`
	}{Keys: make([]jwkJSON, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, jwkJSON{Kty: "OKP", Crv: "Ed25519", X: b64url.EncodeToString(k.Key), Kid: k.KID, Alg: "EdDSA"})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
