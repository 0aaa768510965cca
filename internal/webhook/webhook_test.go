package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// The signature is the Standard Webhooks one: this vector is the specification's example.
func TestSignMatchesTheStandard(t *testing.T) {
	key, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
}

func TestVerify(t *testing.T) {
	_, key := NewSecret()
	_, other := NewSecret()
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"evt_1"}`)
	h := http.Header{}
	h.Set(HeaderID, "evt_1")
	h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(HeaderSignature, SignatureHeader([][]byte{other, key}, "evt_1", now.Unix(), body))
	if err := Verify(key, h, body, now, 5*time.Minute); err != nil {
		t.Fatalf("the second of two signatures: %v", err)
	}
	if err := Verify(key, h, []byte(`{"id":"evt_2"}`), now, 5*time.Minute); !errors.Is(err, ErrSignature) {
		t.Fatalf("changed body: %v", err)
	}
	if err := Verify(key, h, body, now.Add(10*time.Minute), 5*time.Minute); err == nil {
		t.Fatal("a replay 10 minutes later was accepted")
	}
	h.Del(HeaderSignature)
	if err := Verify(key, h, body, now, 5*time.Minute); err == nil {
		t.Fatal("no signature was accepted")
	}
	for _, s := range []string{"", "whsec_", "whsec_!!!", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_AAAA"} {
		if _, err := ParseSecret(s); err == nil {
			t.Errorf("secret %q accepted", s)
		}
	}
}

// Under a strict policy the dialler refuses the address it is about to connect to, whatever
// name led there: a hostname that resolves to loopback (DNS rebinding) is refused at dial time.
func TestStrictClientRefusesPrivateAddressesWhenDialling(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, url := range []string{srv.URL, "http://localhost:" + port + "/"} {
		resp, err := Policy{Strict: true}.Client(2 * time.Second).Get(url)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s: delivered to a loopback address", url)
		}
		if !errors.Is(err, ErrURL) {
			t.Fatalf("%s: %v, want ErrURL", url, err)
		}
	}
	resp, err := Policy{}.Client(2 * time.Second).Get(srv.URL)
	if err != nil {
		t.Fatalf("development policy: %v", err)
	}
	resp.Body.Close()
}

// A redirect is the answer, never followed.
func TestClientDoesNotFollowRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data", http.StatusFound)
	}))
	defer srv.Close()
	resp, err := Policy{}.Client(2*time.Second).Post(srv.URL, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("status %d, want the 302 itself", resp.StatusCode)
	}
}

func TestCheckURLDevelopment(t *testing.T) {
	p := Policy{}
	for _, ok := range []string{"http://127.0.0.1:9/x", "http://localhost/hooks", "https://example.com/"} {
		if err := p.CheckURL(context.Background(), ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/relative", "ftp://x/", "https://u:p@x/", "mailto:a@b", "https://x/#frag"} {
		if err := p.CheckURL(context.Background(), bad); !errors.Is(err, ErrURL) {
			t.Errorf("%q accepted: %v", bad, err)
		}
	}
}
