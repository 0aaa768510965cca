// Package idemhash is what an Idempotency-Key is bound to: the SHA-256 of a request's method,
// path with query and raw body bytes, at the cloud (DESIGN §6.3) and at a gateway (§7) alike.
// It imports nothing of the service's own, so the gateway binary can use it without linking
// any of the cloud's packages.
package idemhash

import "crypto/sha256"

// Sum is the SHA-256 of method, uri (path with query) and the raw body bytes, each part
// ended by a NUL byte but the last, so no two different requests share a hash by moving
// bytes from one part to the next.
func Sum(method, uri string, body []byte) []byte {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(uri))
	h.Write([]byte{0})
	h.Write(body)
	return h.Sum(nil)
}
