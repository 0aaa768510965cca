package main

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/webhook"
)

// `webhook listen` prints a verified event and refuses a forged one.
func TestWebhookListen(t *testing.T) {
	secret, key := webhook.NewSecret()
	addr := testenv.FreeAddr(t)
	// Read only once the command has stopped, so the buffer is never shared.
	out := &bytes.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- webhookCmd(ctx, &adminEnv{out: out}, []string{"listen", "-addr", addr, "-secret", secret})
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	defer stop()

	post := func(k []byte, id string) int {
		body := []byte(`{"id":"` + id + `","type":"webhook.test","created_at":"2026-11-26T10:00:00.000Z","organization_id":1,"sub_organization_id":null,"data":{"n":1}}`)
		ts := time.Now().Unix()
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", bytes.NewReader(body))
		req.Header.Set(webhook.HeaderID, id)
		req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(webhook.HeaderSignature, webhook.Sign(k, id, ts, body))
		for range 100 {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				return resp.StatusCode
			}
			time.Sleep(20 * time.Millisecond)
			req.Body, _ = req.GetBody()
		}
		t.Fatal("the receiver never answered")
		return 0
	}
	if c := post(key, "evt_good"); c != http.StatusNoContent {
		t.Fatalf("signed delivery: %d", c)
	}
	_, forged := webhook.NewSecret()
	if c := post(forged, "evt_forged"); c != http.StatusUnauthorized {
		t.Fatalf("forged delivery: %d", c)
	}
	stop()
	stop()
	if got := out.String(); !strings.Contains(got, `"id":"evt_good"`) || strings.Contains(got, "evt_forged") {
		t.Fatalf("printed %q", got)
	}
}
