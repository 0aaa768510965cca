package apiserver

import (
	"context"
	"net/netip"
	"strconv"
	"time"
)

// Wrong credentials are limited apart from the requests a caller may make (DESIGN §8), per
// (credential, source address) with a growing back-off (store.CredentialOutcome), so a
// guesser is slowed down without locking out the right secret presented from elsewhere:
//
//   - a client secret (POST /oauth/token, its realm alias and the SDK login, which share one
//     bucket): the answer to every attempt of a (client id, address) is decided by one
//     statement on the bucket's row that also records it (store.CredentialOutcome), so
//     parallel guesses cannot all be judged, and an address in back-off is answered 429
//     whether its secret is right or wrong (it learns nothing); a right secret otherwise clears
//     the bucket and is never counted, so a client's own parallel requests never block it. Ids
//     that name no client share one bucket per address. The client's budget of tokens per
//     minute counts right secrets only.
//   - an API key (app engine x-api-key, gateway cloud API key): a key names no caller until it
//     is found, so wrong keys count per address, after the key's own check; once the address
//     is in back-off its wrong keys answer 429 instead of 401. A valid key is never refused
//     for its address's failures: keys are 256 random bits, so their check is no oracle, and
//     a client sharing an address with a misconfigured one keeps working.

// Surfaces of the failure limits in lockernet_rate_limited_total.
const (
	surfaceTokenFailures      = "token_failures"
	surfaceAppKeyFailures     = "appkey_failures"
	surfaceGatewayKeyFailures = "gateway_key_failures"
)

// secretBucket is the failure bucket of a client secret presented from a; clientID is ""
// for an id that names no client.
func secretBucket(clientID string, a netip.Addr) string {
	return "fail:secret:" + addrBucket(a) + "|" + clientID
}

// keyBucket is the failure bucket of an API's keys presented from a.
func keyBucket(api string, a netip.Addr) string {
	return "fail:" + api + ":" + addrBucket(a)
}

// credentialOutcome records whether a credential presented against bucket was right and
// returns the seconds (> 0) to wait when the bucket is in its back-off: then the answer is
// 429 whatever the credential was. An error recording (Postgres away) lets the request be
// answered on its merits, as countRequest does.
func (s *Server) credentialOutcome(ctx context.Context, bucket string, right bool, surface string) int {
	a, err := s.deps.Store.CredentialOutcome(ctx, bucket, right)
	if err != nil {
		s.logger.WarnContext(ctx, "record a credential outcome", "surface", surface, "err", err)
		return 0
	}
	if a.Allowed {
		return 0
	}
	s.rateLimited.WithLabelValues(surface).Inc()
	return retrySeconds(a.RetryAfter())
}

func retrySeconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

// tooManyFailures is the refusal of a problem+json surface (app engine API, mobile SDK API)
// for a source address in its back-off.
func tooManyFailures(what string, wait int) error {
	return &attemptsLimitedError{msg: "too many " + what + " from this address: try again in " + strconv.Itoa(wait) + " s", retryAfter: wait}
}

// appKeyFailure is the verdict on an app engine key that is not valid: 401, or 429 once the
// request's address is in its back-off for wrong keys.
func (s *Server) appKeyFailure(ctx context.Context) error {
	if wait := s.credentialOutcome(ctx, keyBucket("appkey", clientAddrOf(ctx)), false, surfaceAppKeyFailures); wait > 0 {
		return tooManyFailures("invalid API keys", wait)
	}
	return errUnauthenticated("unknown or deleted API key")
}

// gatewayKeyFailure is the verdict on a gateway cloud API key that is not valid: 401, or 429
// once the request's address is in its back-off for wrong keys.
func (s *Server) gatewayKeyFailure(ctx context.Context) error {
	if wait := s.credentialOutcome(ctx, keyBucket("gatewaykey", clientAddrOf(ctx)), false, surfaceGatewayKeyFailures); wait > 0 {
		return &keyFailuresError{retryAfterSeconds: int64(wait)}
	}
	return errUnauthenticated("the API key is not valid")
}

// keyFailuresError: the source address sent too many invalid keys.
type keyFailuresError struct{ retryAfterSeconds int64 }

func (e *keyFailuresError) Error() string { return "too many invalid API keys" }
