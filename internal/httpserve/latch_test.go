package httpserve

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestLatchAnswersStartingUntilReady(t *testing.T) {
	other := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "not yet", http.StatusServiceUnavailable)
	})
	l := NewLatch(StartingProbes(other), 50*time.Millisecond)
	srv := httptest.NewServer(l)
	defer srv.Close()
	get := func(path string) (int, string, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), strings.TrimSpace(string(b))
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, ra, body := get(p); code != http.StatusServiceUnavailable || ra != "1" || body != `{"status":"starting","checks":{}}` {
			t.Fatalf("%s before ready: %d %q %s", p, code, ra, body)
		}
	}
	if code, _, body := get("/v1/anything"); code != http.StatusServiceUnavailable || body != "not yet" {
		t.Fatalf("other path before ready: %d %s", code, body)
	}
	if l.IsReady() {
		t.Fatal("ready before Ready")
	}
	// A request that arrives while starting waits for Ready and is served by the real handler.
	l2 := NewLatch(StartingProbes(other), time.Minute)
	srv2 := httptest.NewServer(l2)
	defer srv2.Close()
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get(srv2.URL + "/v1/anything")
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- resp.Status + " " + string(b)
	}()
	time.Sleep(50 * time.Millisecond)
	l2.Ready(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "served") }))
	if g := <-got; g != "200 OK served" {
		t.Fatalf("request held while starting: %s", g)
	}
	l.Ready(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	for _, p := range []string{"/healthz", "/v1/anything"} {
		if code, _, body := get(p); code != http.StatusOK || body != "ok" {
			t.Fatalf("%s after ready: %d %s", p, code, body)
		}
	}
}
