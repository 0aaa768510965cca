package apiserver

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/store"
)

// Security scheme of the app engine API.
const schemeAppKey = "appKey"

// needsAppKey is the Security requirement of an app engine operation.
var needsAppKey = []map[string][]string{{schemeAppKey: {}}}

type appKeyKey struct{}

// appKey returns the verified key of an app engine request.
func appKey(ctx context.Context) store.AppKey {
	k, _ := ctx.Value(appKeyKey{}).(store.AppKey)
	return k
}

// authenticateAppKey checks the x-api-key header of an app engine operation.
func (s *Server) authenticateAppKey(api huma.API, ctx huma.Context, next func(huma.Context)) {
	refuse := func(err error) { writeRefusal(api, ctx, s.appError(ctx.Context(), "authenticate", err)) }
	if conflictingCredentials(ctx) {
		refuse(errUnauthenticated("conflicting credentials: present one x-api-key only"))
		return
	}
	presented := strings.TrimSpace(ctx.Header("x-api-key"))
	if presented == "" || len(presented) > 256 {
		refuse(errUnauthenticated("missing or malformed x-api-key header"))
		return
	}
	// The key is checked in Postgres on every request, with its rate-limit count in the same
	// statement (as the gateway cloud API's keys are): a deleted key fails on its next request
	// on every instance.
	k, st, err := s.deps.Store.AuthorizeAppKey(ctx.Context(), credential.Hash(presented), s.rates.AppKey)
	switch {
	case errors.Is(err, store.ErrNotFound):
		refuse(s.appKeyFailure(ctx.Context()))
		return
	case err != nil:
		s.logger.ErrorContext(ctx.Context(), "app key lookup", "err", err)
		refuse(errAuthUnavailable)
		return
	}
	if wait := s.rateHeaders(ctx.SetHeader, store.RateAppKey, st); wait > 0 {
		refuse(rateLimited(wait))
		return
	}
	next(huma.WithValue(ctx, appKeyKey{}, k))
}

// CreateAppKeyRequest is the body of POST /auth/api-key.
type CreateAppKeyRequest struct {
	ClientID          string    `json:"client_id" minLength:"1" maxLength:"128" doc:"A service-provider client of the organization"`
	ClientSecret      string    `json:"client_secret" minLength:"1" maxLength:"256"`
	OrganizationID    FlexID    `json:"organization_id"`
	SubOrganizationID OptFlexID `json:"sub_organization_id,omitempty" doc:"Empty or absent: an organization-wide (admin) key"`
}

// CreatedAppKey is the new key, shown once.
type CreatedAppKey struct {
	APIKey    string    `json:"api_key" doc:"The key; it is not shown again"`
	ID        uuid.UUID `json:"id"`
	CreatedAt Timestamp `json:"created_at"`
}

// AppKeyBody describes a key (never its secret).
type AppKeyBody struct {
	ID                uuid.UUID  `json:"id"`
	Prefix            string     `json:"prefix"`
	SubOrganizationID *int64     `json:"sub_organization_id"`
	CreatedAt         Timestamp  `json:"created_at"`
	LastUsedAt        *Timestamp `json:"last_used_at" nullable:"true"`
}

func (s *Server) registerAppKeys(api huma.API) {
	tags := []string{"App engine: API keys"}
	huma.Register(api, op(huma.Operation{
		OperationID: "create-api-key", Method: http.MethodPost, Path: "/auth/api-key", Tags: tags,
		Summary:     "Generate API key",
		Description: "Needs an organization admin key (one without sub-organization). client_id/client_secret must be a service-provider client of the organization. The key is shown once.",
		Security:    needsAppKey,
	}), s.createAppKey)

	huma.Register(api, op(huma.Operation{
		OperationID: "list-api-keys", Method: http.MethodGet, Path: "/auth/api-key", Tags: tags,
		Summary:     "Get All APIs Key",
		Description: "The keys within the caller's scope: all of the organization's for an admin key, the sub-organization's otherwise. Never the secrets.",
		Security:    needsAppKey,
	}), s.listAppKeys)

	huma.Register(api, op(huma.Operation{
		OperationID: "delete-api-key", Method: http.MethodDelete, Path: "/auth/api-key/{key_id}", Tags: tags,
		Summary:       "Delete API key",
		Description:   "Needs an organization admin key. The key stops working at once on every instance (its next request is refused).",
		DefaultStatus: http.StatusNoContent, Security: needsAppKey,
	}), s.deleteAppKey)
}

// createAppKey answers POST /auth/api-key.
func (s *Server) createAppKey(ctx context.Context, in *struct{ Body CreateAppKeyRequest }) (*struct{ Body CreatedAppKey }, error) {
	caller := appKey(ctx)
	if !caller.OrgWide() {
		return nil, s.appError(ctx, "api key", errForbidden("only an organization admin key may create keys"))
	}
	if int64(in.Body.OrganizationID) != caller.OrganizationID {
		return nil, s.appError(ctx, "api key", errForbidden("organization_id is not the organization of this key"))
	}
	client, err := s.deps.Store.ClientByID(ctx, in.Body.ClientID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, s.appError(ctx, "client", err)
	}
	if err != nil || client.OrganizationID != caller.OrganizationID || client.Disabled || !credential.Equal(in.Body.ClientSecret, client.SecretHash) {
		return nil, s.appError(ctx, "api key", errForbidden("client_id and client_secret are not a client of this organization"))
	}
	var sub *int64
	if in.Body.SubOrganizationID.Set {
		ok, err := s.deps.Store.SubOrganizationOf(ctx, caller.OrganizationID, in.Body.SubOrganizationID.ID)
		if err != nil {
			return nil, s.appError(ctx, "sub-organization", err)
		}
		if !ok {
			return nil, s.appError(ctx, "api key", invalidInput("unknown sub_organization_id"))
		}
		sub = &in.Body.SubOrganizationID.ID
	}
	key, k, err := s.deps.Store.CreateAppKey(ctx, store.AppKey{OrganizationID: caller.OrganizationID,
		SubOrganizationID: sub, ClientID: &client.ClientID})
	if err != nil {
		return nil, s.appError(ctx, "api key", err)
	}
	return &struct{ Body CreatedAppKey }{Body: CreatedAppKey{APIKey: key, ID: k.ID, CreatedAt: ts(k.CreatedAt)}}, nil
}

// listAppKeys answers GET /auth/api-key.
func (s *Server) listAppKeys(ctx context.Context, _ *struct{}) (*struct{ Body []AppKeyBody }, error) {
	caller := appKey(ctx)
	keys, err := s.deps.Store.ListAppKeys(ctx, caller.OrganizationID, caller.SubOrganizationID)
	if err != nil {
		return nil, s.appError(ctx, "api keys", err)
	}
	return &struct{ Body []AppKeyBody }{Body: bodies(keys, func(k store.AppKey) AppKeyBody {
		return AppKeyBody{ID: k.ID, Prefix: k.Prefix, SubOrganizationID: k.SubOrganizationID, CreatedAt: ts(k.CreatedAt),
			LastUsedAt: optTS(k.LastUsedAt)}
	})}, nil
}

// deleteAppKey answers DELETE /auth/api-key/{key_id}.
func (s *Server) deleteAppKey(ctx context.Context, in *struct {
	KeyID string `path:"key_id" format:"uuid"`
}) (*struct{}, error) {
	caller := appKey(ctx)
	if !caller.OrgWide() {
		return nil, s.appError(ctx, "api key", errForbidden("only an organization admin key may delete keys"))
	}
	id, err := uuid.Parse(in.KeyID)
	if err != nil {
		return nil, s.appError(ctx, "api key", errNotFound("api key: not found"))
	}
	if err := s.deps.Store.DeleteAppKey(ctx, caller.OrganizationID, id); err != nil {
		return nil, s.appError(ctx, "api key", err)
	}
	return nil, nil
}
