// Package loadclient is the client side that the fault drills (package drill) and the load
// tool (package bench) share: an HTTP client pooled for hundreds of concurrent callers, one
// exchange read whole and timed, the client-credentials bearer token of the tower API, and
// the open-loop pacer that offers a fixed rate of calls whatever the server does.
package loadclient

import (
	"bytes"
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

// Client sends requests to the system under test as its clients would.
type Client struct {
	http *http.Client
	// OnStatus, when set, is told the status of every answer, the token's included.
	OnStatus func(status int)
}

// New returns a client whose connections are pooled for hundreds of concurrent callers and
// whose every exchange gives up after timeout.
func New(timeout time.Duration) *Client {
	tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}
	return &Client{http: &http.Client{Transport: tr, Timeout: timeout}}
}

// HTTP is the client's http.Client, for callers that need the response itself.
func (c *Client) HTTP() *http.Client { return c.http }

// Answer is one HTTP exchange, read whole.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
	// Latency runs from sending the request to having read the whole answer.
	Latency time.Duration
	// At is when the whole answer had been read.
	At time.Time
}

// Do sends a request with the given headers and body (Content-Type application/json unless
// headers name another) and reads the whole answer. When reading the answer fails,
// it returns what it had with the error.
func (c *Client) Do(ctx context.Context, method, u string, headers map[string]string, body []byte) (Answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return Answer{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return Answer{}, err
	}
	if c.OnStatus != nil {
		c.OnStatus(resp.StatusCode)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	a := Answer{Status: resp.StatusCode, Header: resp.Header, Body: b, Latency: time.Since(start), At: time.Now()}
	if err != nil {
		return a, fmt.Errorf("read answer: %w", err)
	}
	return a, nil
}

// DoJSON is Do with body marshalled as JSON (none when body is nil).
func (c *Client) DoJSON(ctx context.Context, method, u string, headers map[string]string, body any) (Answer, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return Answer{}, err
		}
	}
	return c.Do(ctx, method, u, headers, b)
}

// Excerpt is the start of an answer's body, for an error message.
func Excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// Token is a client-credentials bearer token (POST <base>/oauth/token), renewed before its
// 300 s run out.
type Token struct {
	client           *Client
	url              string
	clientID, secret string

	mu    sync.Mutex
	token string
	at    time.Time
}

// NewToken returns the token of clientID at the API whose root is base.
func NewToken(c *Client, base, clientID, secret string) *Token {
	return &Token{client: c, url: strings.TrimRight(base, "/") + "/oauth/token", clientID: clientID, secret: secret}
}

// Bearer returns the current token, getting a new one when it is older than 4 minutes.
func (t *Token) Bearer(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && time.Since(t.at) < 4*time.Minute {
		return t.token, nil
	}
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {t.clientID}, "client_secret": {t.secret}}
	a, err := t.client.Do(ctx, http.MethodPost, t.url, map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
		[]byte(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("get token: %w", err)
	}
	if a.Status != http.StatusOK {
		return "", fmt.Errorf("get token: HTTP %d: %s", a.Status, Excerpt(a.Body))
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(a.Body, &tok); err != nil {
		return "", fmt.Errorf("decode token: %w", err)
	}
	t.token, t.at = tok.AccessToken, time.Now()
	return t.token, nil
}

// Authorization is the Authorization header of the token, for Do's headers.
func (t *Token) Authorization(ctx context.Context) (map[string]string, error) {
	tok, err := t.Bearer(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]string{"Authorization": "Bearer " + tok}, nil
}
