package towerproto

import (
	"fmt"
	"strconv"
)

// wireNames are the names of a wire enum's values 1, 2, … in order (0 is never a value):
// the token types, event kinds and command kinds share their String, Valid and Parse.
type wireNames[K ~uint8] struct {
	typ   string // the Go type, for the String of an undefined value ("TokenType(9)")
	what  string // what a parse error calls it ("token type")
	names []string
}

func (w wireNames[K]) valid(k K) bool { return k >= 1 && int(k) <= len(w.names) }

func (w wireNames[K]) name(k K) string {
	if w.valid(k) {
		return w.names[k-1]
	}
	return w.typ + "(" + strconv.Itoa(int(k)) + ")"
}

func (w wireNames[K]) parse(s string) (K, error) {
	for i, n := range w.names {
		if n == s {
			return K(i + 1), nil
		}
	}
	return 0, fmt.Errorf("parse %s %q: %w", w.what, s, ErrMalformed)
}
