package towerproto

import (
	"encoding/hex"
	"fmt"
)

// decodeHex accepts non-empty, even-length hex in either case: the cloud writes lower-case,
// Harbor's SDKs send upper-case (DESIGN §4.8). Re-casing changes no byte, and every MAC is
// over the bytes, so a payload cannot be altered that way. Nothing else is tolerated: no
// prefix, no whitespace.
func decodeHex(s string, maxBytes int) ([]byte, error) {
	switch {
	case s == "":
		return nil, fmt.Errorf("%w: empty hex", ErrMalformed)
	case len(s)%2 != 0:
		return nil, fmt.Errorf("%w: odd-length hex", ErrMalformed)
	case len(s)/2 > maxBytes:
		return nil, fmt.Errorf("%w: %d bytes, at most %d allowed", ErrMalformed, len(s)/2, maxBytes)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return nil, fmt.Errorf("%w: byte %d is not hex", ErrMalformed, i)
		}
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return b, nil
}

// towerIDBytes parses a tower id (16 hex digits, either case) into its 8 bytes.
func towerIDBytes(id string) ([8]byte, error) {
	var out [8]byte
	if len(id) != 16 {
		return out, fmt.Errorf("%w: tower id %q is not 16 hex digits", ErrMalformed, id)
	}
	if _, err := hex.Decode(out[:], []byte(id)); err != nil {
		return out, fmt.Errorf("%w: tower id %q is not 16 hex digits", ErrMalformed, id)
	}
	return out, nil
}

// NormalizeTowerID returns the canonical lower-case form of a tower id (16 hex digits,
// either case on input) or an error wrapping ErrMalformed.
func NormalizeTowerID(id string) (string, error) {
	b, err := towerIDBytes(id)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
