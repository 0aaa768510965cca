// Package jwtauth issues and verifies the token service's access tokens: EdDSA (Ed25519)
// JWTs with a kid, signed with keys kept sealed in Postgres so every apiserver instance
// signs and verifies with the same keys, and rotation needs no downtime (old keys stay in
// the JWKS until the tokens they signed have expired).
//
// JWT handling uses github.com/golang-jwt/jwt/v5 (the most used Go JWT library, EdDSA
// support, strict validation options); the JWKS document uses github.com/go-jose/go-jose/v4
// to encode the OKP keys.
package jwtauth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
)

// Scopes of the tower API.
const (
	ScopeServiceProvider = "service_provider"
	ScopeTowerAccess     = "tower_access"
)

const (
	algorithm = "EdDSA"
	// keep retired keys published this long: longer than any token's lifetime.
	retiredKeyGrace = 2 * time.Hour
	// every instance reloads the keys this often, so a revoked key stops verifying everywhere
	// within it (one small query per interval, and only while tokens are being checked).
	refreshEvery = 2 * time.Second
	// MaxTokenLifetime caps exp − iat: Issue refuses longer and Verify rejects them, so a token
	// signed with a stolen key cannot outlive the grace of a retired key.
	MaxTokenLifetime = time.Hour
	// an unknown kid triggers a reload at most this often (a flood of forged kids can't
	// turn into a flood of queries).
	unknownKidBackoff = 5 * time.Second
)

// Errors Verify returns; all mean 401 to the caller.
var (
	ErrInvalidToken = errors.New("invalid token")
	ErrExpiredToken = errors.New("token expired")
)

// Claims are the JWT claims the service issues.
type Claims struct {
	jwt.RegisteredClaims
	Org   int64  `json:"org"`
	Scope string `json:"scope"`
	// AuthorizedParty is the service-provider client the token acts for; for a client
	// credentials token it equals the subject, for a tower_access token made by
	// login/authorize the subject is the app's user label.
	AuthorizedParty string `json:"azp"`
}

// Principal is who a verified token speaks for.
type Principal struct {
	ClientID  string
	Subject   string
	OrgID     int64
	Scopes    []string
	ExpiresAt time.Time
	TokenID   string
}

// HasScope reports whether the token carries scope.
func (p Principal) HasScope(scope string) bool { return slices.Contains(p.Scopes, scope) }

// KeyStore is the persistence the authority needs.
type KeyStore interface {
	SigningKeys(ctx context.Context, keep time.Duration) ([]store.SigningKey, error)
	InsertSigningKey(ctx context.Context, k store.SigningKey) error
	RetireSigningKeysExcept(ctx context.Context, kid string) error
	RevokeSigningKeysExcept(ctx context.Context, kid string) error
}

type signingKey struct {
	kid     string
	private ed25519.PrivateKey
	public  ed25519.PublicKey
	retired bool
}

// Authority signs and verifies tokens for one issuer.
type Authority struct {
	store  KeyStore
	ring   *keyring.Keyring
	issuer string
	now    func() time.Time

	verified verifiedTokens

	mu         sync.RWMutex
	keys       map[string]signingKey
	active     *signingKey
	loadedAt   time.Time
	lastMissAt time.Time
}

// New returns an authority; call EnsureKey once at start-up before signing.
func New(ks KeyStore, ring *keyring.Keyring, issuer string) *Authority {
	return &Authority{store: ks, ring: ring, issuer: issuer, now: time.Now, keys: map[string]signingKey{},
		verified: verifiedTokens{m: map[string]verifiedToken{}}}
}

// Issuer is the iss claim of the tokens.
func (a *Authority) Issuer() string { return a.issuer }

func sealPurpose(kid string) string { return "signing-key:" + kid }

// EnsureKey creates a signing key if there is no active one yet.
func (a *Authority) EnsureKey(ctx context.Context) error {
	if err := a.reload(ctx); err != nil {
		return err
	}
	a.mu.RLock()
	have := a.active != nil
	a.mu.RUnlock()
	if have {
		return nil
	}
	_, err := a.addKey(ctx)
	return err
}

// Rotate adds a new signing key and retires the others; they stay published for verification.
func (a *Authority) Rotate(ctx context.Context) (string, error) {
	return a.rotate(ctx, a.store.RetireSigningKeysExcept)
}

// RotateRevoking adds a new signing key and revokes every other: tokens they signed stop
// verifying at once on this instance and within refreshEvery on the others. For a leaked key.
func (a *Authority) RotateRevoking(ctx context.Context) (string, error) {
	return a.rotate(ctx, a.store.RevokeSigningKeysExcept)
}

// rotate adds a new signing key, then has the others dealt with by others (given the
// new key's id), and reloads the keys.
func (a *Authority) rotate(ctx context.Context, others func(ctx context.Context, kid string) error) (string, error) {
	kid, err := a.addKey(ctx)
	if err != nil {
		return "", err
	}
	if err := others(ctx, kid); err != nil {
		return "", err
	}
	return kid, a.reload(ctx)
}

func (a *Authority) addKey(ctx context.Context) (string, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", fmt.Errorf("generate signing key: %w", err)
	}
	kid := a.now().UTC().Format("20060102") + "-" + uuid.NewString()[:8]
	err = a.store.InsertSigningKey(ctx, store.SigningKey{
		KID: kid, Algorithm: algorithm, PublicKey: pub,
		PrivateKeySealed: a.ring.Seal(sealPurpose(kid), priv.Seed()),
	})
	if err != nil {
		return "", err
	}
	return kid, a.reload(ctx)
}

func (a *Authority) reload(ctx context.Context) error {
	rows, err := a.store.SigningKeys(ctx, retiredKeyGrace)
	if err != nil {
		return fmt.Errorf("load signing keys: %w", err)
	}
	keys := make(map[string]signingKey, len(rows))
	var active *signingKey
	for _, r := range rows { // newest first
		if r.Algorithm != algorithm || len(r.PublicKey) != ed25519.PublicKeySize {
			continue
		}
		seed, err := a.ring.Open(sealPurpose(r.KID), r.PrivateKeySealed)
		if err != nil {
			return fmt.Errorf("load signing key %s: %w", r.KID, err)
		}
		k := signingKey{kid: r.KID, private: ed25519.NewKeyFromSeed(seed), public: ed25519.PublicKey(r.PublicKey), retired: r.RetiredAt != nil}
		keys[r.KID] = k
		if active == nil && !k.retired {
			active = &k
		}
	}
	a.mu.Lock()
	a.keys, a.active, a.loadedAt = keys, active, a.now()
	a.mu.Unlock()
	return nil
}

func (a *Authority) maybeRefresh(ctx context.Context) {
	a.mu.RLock()
	stale := a.now().Sub(a.loadedAt) > refreshEvery
	a.mu.RUnlock()
	if stale {
		_ = a.reload(ctx) // keep the keys we have if Postgres hiccups
	}
}

// Issue signs a token for the given parties and scopes, valid for ttl.
func (a *Authority) Issue(ctx context.Context, subject, clientID string, orgID int64, scopes []string, ttl time.Duration) (string, time.Time, error) {
	a.maybeRefresh(ctx)
	a.mu.RLock()
	active := a.active
	a.mu.RUnlock()
	if active == nil {
		return "", time.Time{}, errors.New("issue token: no active signing key")
	}
	if ttl > MaxTokenLifetime {
		return "", time.Time{}, fmt.Errorf("issue token: lifetime %s over %s", ttl, MaxTokenLifetime)
	}
	now := a.now().UTC().Truncate(time.Second)
	exp := now.Add(ttl)
	claims := Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    a.issuer,
			Subject:   subject,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp),
			ID:        uuid.NewString(),
		},
		Org:             orgID,
		Scope:           strings.Join(scopes, " "),
		AuthorizedParty: clientID,
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	tok.Header["kid"] = active.kid
	s, err := tok.SignedString(active.private)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign token: %w", err)
	}
	return s, exp, nil
}

// Verify checks a token's signature, issuer and lifetime and returns its principal.
func (a *Authority) Verify(ctx context.Context, token string) (Principal, error) {
	if v, ok := a.verified.get(token, a.now()); ok {
		// The key may have been revoked since: it must still be loaded.
		a.maybeRefresh(ctx)
		a.mu.RLock()
		_, live := a.keys[v.kid]
		a.mu.RUnlock()
		if live {
			return v.p, nil
		}
		a.verified.drop(token)
	}
	p, kid, err := a.verify(ctx, token)
	if err == nil {
		a.verified.put(token, verifiedToken{p: p, kid: kid})
	}
	return p, err
}

func (a *Authority) verify(ctx context.Context, token string) (Principal, string, error) {
	a.maybeRefresh(ctx)
	var claims Claims
	var kid string
	_, err := jwt.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
		kid, _ = t.Header["kid"].(string)
		if k, ok := a.key(ctx, kid); ok {
			return k.public, nil
		}
		return nil, fmt.Errorf("unknown kid %q", kid)
	},
		jwt.WithValidMethods([]string{algorithm}),
		jwt.WithIssuer(a.issuer),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(5*time.Second),
		jwt.WithTimeFunc(a.now),
	)
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return Principal{}, "", ErrExpiredToken
	case err != nil:
		return Principal{}, "", fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if claims.Subject == "" || claims.AuthorizedParty == "" || claims.Org == 0 || claims.IssuedAt == nil {
		return Principal{}, "", fmt.Errorf("%w: missing claims", ErrInvalidToken)
	}
	if claims.ExpiresAt.Sub(claims.IssuedAt.Time) > MaxTokenLifetime {
		return Principal{}, "", fmt.Errorf("%w: lifetime over %s", ErrInvalidToken, MaxTokenLifetime)
	}
	return Principal{
		ClientID:  claims.AuthorizedParty,
		Subject:   claims.Subject,
		OrgID:     claims.Org,
		Scopes:    strings.Fields(claims.Scope),
		ExpiresAt: claims.ExpiresAt.Time,
		TokenID:   claims.ID,
	}, kid, nil
}

func (a *Authority) key(ctx context.Context, kid string) (signingKey, bool) {
	a.mu.RLock()
	k, ok := a.keys[kid]
	retry := !ok && a.now().Sub(a.lastMissAt) > unknownKidBackoff
	a.mu.RUnlock()
	if ok || !retry || kid == "" {
		return k, ok
	}
	// A key another instance created since our last reload.
	a.mu.Lock()
	a.lastMissAt = a.now()
	a.mu.Unlock()
	if err := a.reload(ctx); err != nil {
		return signingKey{}, false
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	k, ok = a.keys[kid]
	return k, ok
}

// JWKS returns the published key set (active and recently retired public keys).
func (a *Authority) JWKS(ctx context.Context) (json.RawMessage, error) {
	a.maybeRefresh(ctx)
	a.mu.RLock()
	set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, len(a.keys))}
	for _, k := range a.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.public, KeyID: k.kid, Algorithm: algorithm, Use: "sig"})
	}
	a.mu.RUnlock()
	slices.SortFunc(set.Keys, func(x, y jose.JSONWebKey) int { return strings.Compare(y.KeyID, x.KeyID) })
	b, err := json.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("encode jwks: %w", err)
	}
	return b, nil
}

// UnverifiedKID returns the kid in a token's header, for logs and tests.
func UnverifiedKID(token string) string {
	head, _, ok := strings.Cut(token, ".")
	if !ok {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return ""
	}
	var h struct {
		KID string `json:"kid"`
	}
	_ = json.Unmarshal(b, &h)
	return h.KID
}
