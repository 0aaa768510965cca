package towersim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// ScopeTowerAccess is the scope of the tokens the SDK uploads events with.
const ScopeTowerAccess = "tower_access"

// ClientCredentials is the default TokenSource: it obtains a tower_access token from
// POST {apiBaseURL}/oauth/token with the client-credentials grant, caches it and gets a new
// one shortly before it expires. It is safe for concurrent use.
type ClientCredentials struct {
	tokenURL     string
	clientID     string
	clientSecret string
	client       *http.Client
	now          func() time.Time

	mu      sync.Mutex
	token   string
	renewAt time.Time
}

var _ TokenSource = (*ClientCredentials)(nil)

// NewClientCredentials returns a token source for the token service at apiBaseURL.
func NewClientCredentials(apiBaseURL, clientID, clientSecret string, opts ...Option) *ClientCredentials {
	o := buildOptions(opts)
	return &ClientCredentials{
		tokenURL:     strings.TrimRight(apiBaseURL, "/") + "/oauth/token",
		clientID:     clientID,
		clientSecret: clientSecret,
		client:       o.httpClient,
		now:          o.now,
	}
}

// Token returns the cached token or fetches a new one.
func (c *ClientCredentials) Token(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" && c.now().Before(c.renewAt) {
		return c.token, nil
	}
	issued := c.now()
	token, lifetime, err := c.fetch(ctx)
	if err != nil {
		return "", err
	}
	// Renew a tenth of the lifetime early (at most 30 s), so an upload never starts with a
	// token about to expire in flight.
	c.token = token
	c.renewAt = issued.Add(lifetime - min(lifetime/10, 30*time.Second))
	return c.token, nil
}

// Invalidate drops the cached token, so the next Token call fetches a new one.
func (c *ClientCredentials) Invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.token = ""
}

func (c *ClientCredentials) fetch(ctx context.Context) (string, time.Duration, error) {
	form := url.Values{
		"grant_type":    {"client_credentials"},
		"client_id":     {c.clientID},
		"client_secret": {c.clientSecret},
		"scope":         {ScopeTowerAccess},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, fmt.Errorf("build token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("request access token: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return "", 0, fmt.Errorf("read token answer: %w", err)
	}
	var out struct {
		AccessToken      string `json:"access_token"`
		ExpiresIn        int64  `json:"expires_in"`
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
	}
	_ = json.Unmarshal(raw, &out) // judged by the fields below
	if resp.StatusCode != http.StatusOK {
		if out.Error != "" {
			return "", 0, fmt.Errorf("request access token: token service answered %d %s: %s", resp.StatusCode, out.Error, out.ErrorDescription)
		}
		return "", 0, fmt.Errorf("request access token: token service answered %d: %s", resp.StatusCode, snippet(raw))
	}
	if out.AccessToken == "" {
		return "", 0, fmt.Errorf("request access token: no access_token in answer: %s", snippet(raw))
	}
	lifetime := time.Duration(out.ExpiresIn) * time.Second
	if lifetime <= 0 {
		lifetime = time.Minute // the token service promised nothing; ask again soon
	}
	return out.AccessToken, lifetime, nil
}
