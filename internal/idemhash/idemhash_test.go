package idemhash_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lockernet/lockernet/internal/idemhash"
)

// Requests that differ in method, path or body never share a hash, also when bytes move from
// one part to the next; the same request always has the same one.
func TestSumTellsRequestsApart(t *testing.T) {
	t.Parallel()
	a := idemhash.Sum("POST", "/lockers/1/open", []byte(`{}`))
	assert.Equal(t, a, idemhash.Sum("POST", "/lockers/1/open", []byte(`{}`)))
	assert.Len(t, a, 32)
	for _, other := range [][]byte{
		idemhash.Sum("PATCH", "/lockers/1/open", []byte(`{}`)),
		idemhash.Sum("POST", "/lockers/2/open", []byte(`{}`)),
		idemhash.Sum("POST", "/lockers/1/open", []byte(`{"x":1}`)),
		idemhash.Sum("POST", "/lockers/1/open?x", []byte(`{}`)),
		idemhash.Sum("POS", "T/lockers/1/open", []byte(`{}`)),
		idemhash.Sum("POST", "/lockers/1/open{", []byte(`}`)),
	} {
		assert.NotEqual(t, a, other)
	}
}
