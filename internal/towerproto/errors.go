package towerproto

import "errors"

// Sentinel errors, matched with errors.Is. Every decoding failure wraps exactly one of them,
// except an authenticator with an unknown key version, which wraps both ErrBadMAC (it cannot
// be verified) and ErrVersion (why).
var (
	// ErrMalformed: not even-length hex, wrong length or a field out of range.
	ErrMalformed = errors.New("malformed")
	// ErrBadMAC: the authenticator does not match the payload under the given key.
	ErrBadMAC = errors.New("bad mac")
	// ErrVersion: a payload format or key version this code does not know.
	ErrVersion = errors.New("unsupported version")
	// ErrKey: the key passed in is not a derived 32-byte key.
	ErrKey = errors.New("invalid key")
)
