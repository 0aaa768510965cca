package testenv

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/lockernet/lockernet/internal/dev/contract"
)

// The contract check (DESIGN §8, internal/dev/contract): every answer Exchange receives from
// a server whose OpenAPI document is registered here — the apiserver of every env — is
// validated against the document that server serves; the violations fail the test.

var (
	contractsMu sync.Mutex
	contracts   []*contract.Contract
)

// CheckContract validates every answer Exchange receives from baseURL against spec until the
// test ends, then fails the test with the violations seen.
func CheckContract(t testing.TB, baseURL string, spec []byte) *contract.Contract {
	t.Helper()
	c, err := contract.New(baseURL, spec)
	if err != nil {
		t.Fatalf("contract of %s: %v", baseURL, err)
	}
	contractsMu.Lock()
	contracts = append(contracts, c)
	contractsMu.Unlock()
	t.Cleanup(func() {
		contractsMu.Lock()
		for i, have := range contracts {
			if have == c {
				contracts = append(contracts[:i], contracts[i+1:]...)
				break
			}
		}
		contractsMu.Unlock()
		for _, v := range c.Violations() {
			t.Errorf("contract: %s", v)
		}
	})
	return c
}

// checkContract validates an answer of Exchange if its server has a contract.
func checkContract(method, fullURL string, reqHeader http.Header, r Response) {
	contractsMu.Lock()
	var c *contract.Contract
	for _, have := range contracts {
		if have.Covers(fullURL) {
			c = have
			break
		}
	}
	contractsMu.Unlock()
	if c != nil {
		c.Check(method, fullURL, reqHeader, r.Status, r.Header, r.Body)
	}
}

// fetchSpec reads a served OpenAPI document.
func fetchSpec(specURL string, header http.Header) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, specURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", specURL, resp.StatusCode, b)
	}
	return b, nil
}
