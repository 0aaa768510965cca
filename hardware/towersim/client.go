package towersim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// ControlClient calls a running simulator's control API (the CLI and end-to-end tests use
// it).
type ControlClient struct {
	baseURL string
	client  *http.Client
}

// NewControlClient returns a client for the simulator at baseURL (e.g. http://127.0.0.1:8070).
func NewControlClient(baseURL string, client *http.Client) *ControlClient {
	if client == nil {
		client = http.DefaultClient
	}
	return &ControlClient{baseURL: strings.TrimRight(baseURL, "/"), client: client}
}

// ControlError is a non-200 answer of the control API.
type ControlError struct {
	StatusCode int
	Code       string // the "error" field of the answer
	Message    string
}

func (e *ControlError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("simulator answered %d", e.StatusCode)
	}
	return fmt.Sprintf("simulator answered %d %s: %s", e.StatusCode, e.Code, e.Message)
}

// Open presents a token at a tower. A refusal is a normal answer (Opened false).
func (c *ControlClient) Open(ctx context.Context, towerID string, req OpenRequest) (OpenResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return OpenResponse{}, fmt.Errorf("encode open request: %w", err)
	}
	u := c.baseURL + "/sim/towers/" + url.PathEscape(towerID) + "/open"
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return OpenResponse{}, fmt.Errorf("build open request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(hreq)
	if err != nil {
		return OpenResponse{}, fmt.Errorf("call simulator: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return OpenResponse{}, fmt.Errorf("read simulator answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var er ErrorResponse
		if json.Unmarshal(raw, &er) != nil || er.Error == "" {
			er.Message = snippet(raw)
		}
		return OpenResponse{}, &ControlError{StatusCode: resp.StatusCode, Code: er.Error, Message: er.Message}
	}
	var out OpenResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		return OpenResponse{}, fmt.Errorf("decode simulator answer: %w", err)
	}
	return out, nil
}
