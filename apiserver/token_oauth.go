package apiserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/store"
)

// Token lifetimes (DESIGN §3).
const (
	ClientTokenTTL = 300 * time.Second
	SDKTokenTTL    = time.Hour
)

// TokenRequest documents the form fields of the token endpoint.
type TokenRequest struct {
	GrantType    string `json:"grant_type" enum:"client_credentials"`
	ClientID     string `json:"client_id,omitempty" doc:"Unless HTTP Basic authentication is used"`
	ClientSecret string `json:"client_secret,omitempty" doc:"Unless HTTP Basic authentication is used"`
	Scope        string `json:"scope,omitempty" doc:"Space-separated scopes; all of the client's scopes when absent" example:"service_provider tower_access"`
}

// TokenResponse is a successful token answer.
type TokenResponse struct {
	AccessToken      string  `json:"access_token"`
	TokenType        string  `json:"token_type" example:"Bearer"`
	ExpiresIn        int     `json:"expires_in" example:"300"`
	RefreshToken     *string `json:"refresh_token"`
	RefreshExpiresIn int     `json:"refresh_expires_in"`
	Scope            string  `json:"scope" example:"service_provider tower_access"`
}

// TokenInput is the token endpoint's raw request; exported so huma fills it when embedded
// (the realm alias).
type TokenInput struct {
	Authorization string `header:"Authorization"`
	ContentType   string `header:"Content-Type"`
	RawBody       []byte
}

type tokenOutput struct {
	Status          int
	CacheControl    string `header:"Cache-Control"`
	Pragma          string `header:"Pragma"`
	WWWAuthenticate string `header:"WWW-Authenticate"`
	RetryAfter      string `header:"Retry-After"`
	// The rate-limit headers, on a 429 (DESIGN §8).
	RateLimitLimit     string `header:"X-RateLimit-Limit"`
	RateLimitRemaining string `header:"X-RateLimit-Remaining"`
	RateLimitReset     string `header:"X-RateLimit-Reset"`
	Body               any
}

// DiscoveryDocument is the subset of OpenID Provider metadata a client-credentials client reads.
type DiscoveryDocument struct {
	Issuer                            string   `json:"issuer"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	JWKSURI                           string   `json:"jwks_uri"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	ScopesSupported                   []string `json:"scopes_supported"`
	ResponseTypesSupported            []string `json:"response_types_supported"`
	IDTokenSigningAlgValuesSupported  []string `json:"id_token_signing_alg_values_supported"`
	SubjectTypesSupported             []string `json:"subject_types_supported"`
}

// PrincipalBody describes the caller of login/test-token.
type PrincipalBody struct {
	ClientID       string    `json:"client_id"`
	Subject        string    `json:"subject"`
	OrganizationID int64     `json:"organization_id"`
	Scopes         []string  `json:"scopes"`
	ExpiresAt      Timestamp `json:"expires_at"`
}

// SDKToken is the tower_access token a mobile app receives.
type SDKToken struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type" example:"Bearer"`
	ExpiresIn   int    `json:"expires_in" example:"3600"`
}

// JWKSBody documents the published JSON Web Key Set (the handler writes jwtauth's).
type JWKSBody struct {
	Keys []JWKBody `json:"keys" doc:"Active and recently retired public keys, newest first"`
}

// JWKBody is one public key (RFC 7517); the key's own parameters (n and e, or crv, x and y)
// depend on its type.
type JWKBody struct {
	_   struct{} `additionalProperties:"true"`
	Kty string   `json:"kty" example:"OKP"`
	Kid string   `json:"kid"`
	Use string   `json:"use" enum:"sig"`
	Alg string   `json:"alg"`
}

func (s *Server) registerOAuth(api huma.API) {
	reg := api.OpenAPI().Components.Schemas
	formBody := &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{
		"application/x-www-form-urlencoded": {Schema: reg.Schema(reflect.TypeFor[TokenRequest](), true, "TokenRequest")},
	}}
	responses := map[string]*huma.Response{
		"200": {Description: "Access token", Content: map[string]*huma.MediaType{"application/json": {Schema: reg.Schema(reflect.TypeFor[TokenResponse](), true, "TokenResponse")}}},
		"400": {Description: "RFC 6749 error", Content: map[string]*huma.MediaType{"application/json": {Schema: reg.Schema(reflect.TypeFor[OAuthError](), true, "OAuthError")}}},
		"401": {Description: "Unknown client or wrong secret (invalid_client)", Content: map[string]*huma.MediaType{"application/json": {Schema: reg.Schema(reflect.TypeFor[OAuthError](), true, "OAuthError")}}},
	}
	huma.Register(api, op(huma.Operation{
		OperationID: "post-oauth-token", Method: http.MethodPost, Path: "/oauth/token", Tags: []string{"Token service"},
		Summary:     "Get an access token (client credentials)",
		Description: "RFC 6749 client credentials grant. Client authentication by HTTP Basic or by the form fields client_id and client_secret.",
		RequestBody: formBody, Responses: responses, SkipValidateBody: true,
	}), s.postOAuthToken)
	huma.Register(api, op(huma.Operation{
		OperationID: "post-realm-token", Method: http.MethodPost, Path: "/realms/{realm}/protocol/openid-connect/token", Tags: []string{"Token service"},
		Summary:     "Get an access token (Keycloak-style alias)",
		Description: "The same handler as POST /oauth/token, at the path Harbor clients use.",
		RequestBody: formBody, Responses: responses, SkipValidateBody: true,
	}), s.postRealmToken)

	jwksResponses := func() map[string]*huma.Response {
		return map[string]*huma.Response{"200": {Description: "The key set (RFC 7517)", Content: map[string]*huma.MediaType{
			"application/json": {Schema: reg.Schema(reflect.TypeFor[JWKSBody](), true, "")}}}}
	}
	huma.Register(api, op(huma.Operation{
		OperationID: "get-jwks", Method: http.MethodGet, Path: "/.well-known/jwks.json", Tags: []string{"Token service"},
		Summary: "Public keys that verify access tokens (JWKS)", Responses: jwksResponses(),
	}), s.getJWKS)
	huma.Register(api, op(huma.Operation{
		OperationID: "get-realm-certs", Method: http.MethodGet, Path: "/realms/{realm}/protocol/openid-connect/certs", Tags: []string{"Token service"},
		Summary: "JWKS (Keycloak-style alias)", Responses: jwksResponses(),
	}), s.getRealmCerts)

	huma.Register(api, op(huma.Operation{
		OperationID: "get-openid-configuration", Method: http.MethodGet, Path: "/.well-known/openid-configuration", Tags: []string{"Token service"},
		Summary: "Discovery document",
	}), s.getOpenIDConfiguration)
	huma.Register(api, op(huma.Operation{
		OperationID: "get-realm-openid-configuration", Method: http.MethodGet, Path: "/realms/{realm}/.well-known/openid-configuration", Tags: []string{"Token service"},
		Summary: "Discovery document (Keycloak-style alias)",
	}), s.getRealmOpenIDConfiguration)

	huma.Register(api, op(huma.Operation{
		OperationID: "post-login-test-token", Method: http.MethodPost, Path: "/api/v1/login/test-token", Tags: []string{"Login"},
		Summary: "Check a token and see whom it speaks for", Security: needs(""),
	}), s.postLoginTestToken)

	huma.Register(api, op(huma.Operation{
		OperationID: "post-login-authorize", Method: http.MethodPost, Path: "/api/v1/login/authorize", Tags: []string{"Login"},
		Summary:     "Get the tower_access token for a mobile app user",
		Description: "Returns a tower_access token whose subject is the given user label, for the mobile SDK to open tower sessions and upload tower events. 403 when the client is not granted tower_access.",
		Security:    needs(jwtauth.ScopeServiceProvider),
	}), s.postLoginAuthorize)
}

// postOAuthToken answers a client credentials grant; every refusal is an RFC 6749 body.
func (s *Server) postOAuthToken(ctx context.Context, in *TokenInput) (*tokenOutput, error) {
	out, err := s.issueClientToken(ctx, in)
	if err != nil {
		return s.tokenFailure(ctx, err), nil
	}
	return out, nil
}

// postRealmToken is postOAuthToken at the path Harbor's clients use.
func (s *Server) postRealmToken(ctx context.Context, in *struct {
	Realm string `path:"realm" maxLength:"64"`
	TokenInput
}) (*tokenOutput, error) {
	return s.postOAuthToken(ctx, &in.TokenInput)
}

type jwksOutput struct {
	CacheControl string `header:"Cache-Control"`
	Body         json.RawMessage
}

func (s *Server) getJWKS(ctx context.Context, _ *struct{}) (*jwksOutput, error) {
	b, err := s.deps.Auth.JWKS(ctx)
	if err != nil {
		return nil, s.towerError(ctx, "get jwks", err)
	}
	return &jwksOutput{CacheControl: "public, max-age=60", Body: b}, nil
}

// getRealmCerts is getJWKS at the path Harbor's clients use.
func (s *Server) getRealmCerts(ctx context.Context, _ *struct {
	Realm string `path:"realm" maxLength:"64"`
}) (*jwksOutput, error) {
	return s.getJWKS(ctx, nil)
}

type discoveryOutput struct{ Body DiscoveryDocument }

// discovery is the discovery document naming tokenPath as the token endpoint.
func (s *Server) discovery(tokenPath string) *discoveryOutput {
	base := s.deps.PublicURL
	return &discoveryOutput{Body: DiscoveryDocument{
		Issuer:                            s.deps.Auth.Issuer(),
		TokenEndpoint:                     base + tokenPath,
		JWKSURI:                           base + "/.well-known/jwks.json",
		GrantTypesSupported:               []string{"client_credentials"},
		TokenEndpointAuthMethodsSupported: []string{"client_secret_basic", "client_secret_post"},
		ScopesSupported:                   []string{jwtauth.ScopeServiceProvider, jwtauth.ScopeTowerAccess},
		ResponseTypesSupported:            []string{"token"},
		IDTokenSigningAlgValuesSupported:  []string{"EdDSA"},
		SubjectTypesSupported:             []string{"public"},
	}}
}

func (s *Server) getOpenIDConfiguration(_ context.Context, _ *struct{}) (*discoveryOutput, error) {
	return s.discovery("/oauth/token"), nil
}

func (s *Server) getRealmOpenIDConfiguration(_ context.Context, in *struct {
	Realm string `path:"realm" maxLength:"64"`
}) (*discoveryOutput, error) {
	return s.discovery("/realms/" + url.PathEscape(in.Realm) + "/protocol/openid-connect/token"), nil
}

func (s *Server) postLoginTestToken(ctx context.Context, _ *struct{}) (*struct{ Body PrincipalBody }, error) {
	p := principal(ctx)
	scopes := p.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return &struct{ Body PrincipalBody }{Body: PrincipalBody{
		ClientID: p.ClientID, Subject: p.Subject, OrganizationID: p.OrgID, Scopes: scopes, ExpiresAt: ts(p.ExpiresAt),
	}}, nil
}

// postLoginAuthorize hands a client's app user a tower_access token, if the client may.
func (s *Server) postLoginAuthorize(ctx context.Context, in *struct {
	Body struct {
		UserID string `json:"userId" minLength:"1" maxLength:"128" doc:"The app's label for its user"`
	}
}) (*struct{ Body SDKToken }, error) {
	p := principal(ctx)
	userID := strings.TrimSpace(in.Body.UserID)
	if userID == "" {
		return nil, s.towerError(ctx, "authorize", invalidInput("userId must not be blank"))
	}
	// Only a client granted tower_access may hand it to its users.
	cl, err := s.deps.Store.ClientByID(ctx, p.ClientID)
	if err != nil {
		return nil, s.towerError(ctx, "client", err)
	}
	if !slices.Contains(cl.Scopes, jwtauth.ScopeTowerAccess) {
		return nil, s.towerError(ctx, "authorize", errForbidden("the client is not granted the scope "+jwtauth.ScopeTowerAccess))
	}
	tok, _, err := s.deps.Auth.Issue(ctx, userID, p.ClientID, p.OrgID, []string{jwtauth.ScopeTowerAccess}, SDKTokenTTL)
	if err != nil {
		return nil, s.towerError(ctx, "authorize", err)
	}
	return &struct{ Body SDKToken }{Body: SDKToken{AccessToken: tok, TokenType: "Bearer", ExpiresIn: int(SDKTokenTTL.Seconds())}}, nil
}

// issueClientToken implements the client credentials grant. A refusal is a tokenRefusal;
// tokenFailure turns every error into its RFC 6749 body.
func (s *Server) issueClientToken(ctx context.Context, in *TokenInput) (*tokenOutput, error) {
	mt, _, _ := mime.ParseMediaType(in.ContentType)
	if mt != "application/x-www-form-urlencoded" {
		return nil, refuseToken("invalid_request", "the body must be application/x-www-form-urlencoded")
	}
	form, err := url.ParseQuery(string(in.RawBody))
	if err != nil {
		return nil, refuseToken("invalid_request", "malformed form body")
	}
	for _, k := range []string{"grant_type", "client_id", "client_secret", "scope"} {
		if len(form[k]) > 1 {
			return nil, refuseToken("invalid_request", "parameter "+k+" repeated")
		}
	}
	switch gt := form.Get("grant_type"); gt {
	case "client_credentials":
	case "":
		return nil, refuseToken("invalid_request", "grant_type is required")
	default:
		return nil, refuseToken("unsupported_grant_type", "only client_credentials is supported")
	}
	id, secret, basic, err := basicCredentials(in.Authorization)
	if err != nil {
		return nil, refuseToken("invalid_client", err.Error())
	}
	if basic && (form.Has("client_id") && form.Get("client_id") != id || form.Has("client_secret")) {
		return nil, refuseToken("invalid_request", "use one client authentication method, not both")
	}
	if !basic {
		id, secret = form.Get("client_id"), form.Get("client_secret")
	}
	if id == "" || secret == "" {
		return nil, refuseToken("invalid_client", "client authentication is required")
	}
	client, refused, err := s.checkClientSecret(ctx, id, secret, nil)
	switch {
	case err != nil:
		return nil, err
	case refused != nil:
		return nil, refused
	}
	scopes := client.Scopes
	if requested := strings.Fields(form.Get("scope")); len(requested) > 0 {
		for _, sc := range requested {
			if !slices.Contains(client.Scopes, sc) {
				return nil, refuseToken("invalid_scope", "scope "+sc+" is not granted to this client")
			}
		}
		slices.Sort(requested)
		scopes = slices.Compact(requested)
	}
	tok, _, err := s.deps.Auth.Issue(ctx, client.ClientID, client.ClientID, client.OrganizationID, scopes, ClientTokenTTL)
	if err != nil {
		return nil, fmt.Errorf("sign token: %w", err)
	}
	return &tokenOutput{Status: http.StatusOK, CacheControl: "no-store", Pragma: "no-cache", Body: &TokenResponse{
		AccessToken: tok, TokenType: "Bearer", ExpiresIn: int(ClientTokenTTL.Seconds()),
		RefreshExpiresIn: 0, Scope: strings.Join(scopes, " "),
	}}, nil
}

// basicCredentials decodes HTTP Basic client authentication (RFC 6749 §2.3.1: the id and
// secret are form-encoded before base64).
func basicCredentials(header string) (id, secret string, ok bool, err error) {
	scheme, rest, found := strings.Cut(strings.TrimSpace(header), " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false, nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
	if err != nil {
		return "", "", false, errors.New("malformed Basic credentials")
	}
	u, p, found := strings.Cut(string(raw), ":")
	if !found {
		return "", "", false, errors.New("malformed Basic credentials")
	}
	if id, err = url.QueryUnescape(u); err != nil {
		return "", "", false, errors.New("malformed Basic credentials")
	}
	if secret, err = url.QueryUnescape(p); err != nil {
		return "", "", false, errors.New("malformed Basic credentials")
	}
	return id, secret, true, nil
}

// checkClientSecret is the credential exchange both the token endpoint and the SDK login make
// (DESIGN §8): wrong secrets are limited per (client id, source address) with a growing
// back-off (credential_failures.go), and the client's token budget per minute counts right
// secrets only, on both endpoints together. refused is a tokenRefusal: invalid_client or
// slow_down with its headers. Once the secret is right, setHeader (if not nil) receives the
// X-RateLimit-* headers of the client's budget, so that a caller can send them on its answer
// whatever it is.
func (s *Server) checkClientSecret(ctx context.Context, id, secret string, setHeader func(name, value string)) (client store.Client, refused *tokenRefusal, err error) {
	addr := clientAddrOf(ctx)
	client, err = s.deps.Store.ClientByID(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalidInput):
		// An id Postgres cannot even look up (a NUL or bytes that are not UTF-8, which HTTP
		// Basic credentials can carry) names no client either.
		credential.Equal(secret, make([]byte, 32)) // same work as a real comparison
		if wait := s.credentialOutcome(ctx, secretBucket("", addr), false, surfaceTokenFailures); wait > 0 {
			return store.Client{}, failuresRefusal(wait), nil
		}
		return store.Client{}, &tokenRefusal{code: "invalid_client", desc: "unknown client or wrong secret"}, nil
	case err != nil:
		return store.Client{}, nil, fmt.Errorf("load client: %w", err)
	}
	right := credential.Equal(secret, client.SecretHash) && !client.Disabled
	if wait := s.credentialOutcome(ctx, secretBucket(client.ClientID, addr), right, surfaceTokenFailures); wait > 0 {
		return store.Client{}, failuresRefusal(wait), nil
	}
	if !right {
		return store.Client{}, &tokenRefusal{code: "invalid_client", desc: "unknown client or wrong secret"}, nil
	}
	rl := map[string]string{}
	collect := func(k, v string) {
		rl[k] = v
		if setHeader != nil {
			setHeader(k, v)
		}
	}
	if wait := s.countRequest(ctx, collect, store.RateTokenClient, client.ClientID, s.rates.Token); wait > 0 {
		return store.Client{}, &tokenRefusal{code: "slow_down", desc: "too many token requests for this client: try again in " + strconv.Itoa(wait) + " s",
			rateLimit: rl}, nil
	}
	return client, nil, nil
}

// failuresRefusal is slow_down for a (client id, address) in its back-off after wrong secrets.
func failuresRefusal(wait int) *tokenRefusal {
	return &tokenRefusal{code: "slow_down", desc: "too many wrong credentials from this address: try again in " + strconv.Itoa(wait) + " s",
		rateLimit: map[string]string{"Retry-After": strconv.Itoa(wait)}}
}
