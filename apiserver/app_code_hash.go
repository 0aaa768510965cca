package apiserver

import (
	"crypto/hmac"
	"crypto/sha256"
)

// pickupCodeHash is the keyed hash a transaction row carries for its pickup code, so the
// list can filter by code without the code being stored in clear.
func (s *Server) pickupCodeHash(code string) []byte {
	m := hmac.New(sha256.New, s.deps.Keyring.Derive("access-code-lookup"))
	m.Write([]byte("pickup-code:" + code))
	return m.Sum(nil)
}
