package gatewayd

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// readSecret is the local API's bearer secret: -secret, or the content of -secret-file with
// its surrounding whitespace trimmed.
func readSecret(c Config) (string, error) {
	switch {
	case c.Secret != "" && c.SecretFile != "":
		return "", errors.New("give -secret or -secret-file, not both")
	case c.Secret != "":
		return c.Secret, nil
	case c.SecretFile != "":
		data, err := os.ReadFile(c.SecretFile)
		if err != nil {
			return "", fmt.Errorf("read secret file: %w", err)
		}
		s := strings.TrimSpace(string(data))
		if s == "" {
			return "", fmt.Errorf("secret file %s is empty", c.SecretFile)
		}
		return s, nil
	}
	return "", errors.New("a secret is required: -secret, -secret-file, LOCKERNET_GATEWAY_SECRET or LOCKERNET_GATEWAY_SECRET_FILE")
}

// checkSecret refuses a bearer secret that is not at least 32 random bytes, written as hex
// (64 digits or more) or base64: the local API opens doors, and a short or memorable secret
// can be guessed.
func checkSecret(s string) error {
	const short = "the secret must be at least 32 random bytes, as 64 or more hex digits or as base64 (e.g. `openssl rand -hex 32`)"
	if strings.Trim(s, "0123456789abcdefABCDEF") == "" {
		// Hex digits carry 4 bits each, whatever else they would decode as.
		if len(s) < 64 {
			return errors.New(short)
		}
		return nil
	}
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.StdEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) >= 32 {
			return nil
		}
	}
	return errors.New(short)
}
