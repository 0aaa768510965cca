package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/webhook"
)

// WebhookSettings configure the webhook endpoints' management (DESIGN §10).
type WebhookSettings struct {
	// Policy decides which URLs an endpoint may have (strict in production).
	Policy webhook.Policy
	// RotationOverlap is how long the previous secret keeps signing after a rotation (24 h
	// when zero).
	RotationOverlap time.Duration
}

// WebhookSettingsFromConfig reads the settings of cmd/apiserver.
func WebhookSettingsFromConfig(c config.Config) WebhookSettings {
	return WebhookSettings{Policy: webhook.Policy{Strict: c.WebhookStrict()}}
}

// WebhookEndpointBody is an endpoint as the API shows it (never its secret).
type WebhookEndpointBody struct {
	ID                uuid.UUID `json:"id"`
	URL               string    `json:"url"`
	Description       string    `json:"description"`
	EventTypes        []string  `json:"event_types" doc:"The event types delivered to this endpoint; empty: all"`
	Enabled           bool      `json:"enabled"`
	DisabledReason    *string   `json:"disabled_reason" doc:"Why the service disabled the endpoint (410 Gone, five days of failures); null when enabled or disabled by its owner"`
	SubOrganizationID *int64    `json:"sub_organization_id" doc:"The sub-organization whose events it receives; null: the whole organization's"`
	CreatedAt         Timestamp `json:"created_at"`
	UpdatedAt         Timestamp `json:"updated_at"`
}

// CreatedWebhookEndpoint is a new endpoint with its signing secret, shown once.
type CreatedWebhookEndpoint struct {
	WebhookEndpointBody
	Secret string `json:"secret" doc:"whsec_ and the base64 of 32 bytes: the HMAC-SHA256 key of the webhook-signature header. Shown once."`
}

// CreateWebhookEndpointRequest registers an endpoint.
type CreateWebhookEndpointRequest struct {
	URL         string   `json:"url" maxLength:"2048" doc:"https URL (http and loopback allowed outside production)"`
	Description string   `json:"description,omitempty" maxLength:"256"`
	EventTypes  []string `json:"event_types,omitempty" maxItems:"32" doc:"Event types to deliver; absent or empty: all"`
	Enabled     *bool    `json:"enabled,omitempty" doc:"Default true"`
}

// UpdateWebhookEndpointRequest changes an endpoint; absent fields stay as they are.
type UpdateWebhookEndpointRequest struct {
	URL         *string   `json:"url,omitempty" maxLength:"2048"`
	Description *string   `json:"description,omitempty" maxLength:"256"`
	EventTypes  *[]string `json:"event_types,omitempty" maxItems:"32" doc:"Empty: all event types"`
	Enabled     *bool     `json:"enabled,omitempty" doc:"true re-enables an endpoint the service disabled"`
}

type endpointPath struct {
	EndpointID string `path:"endpoint_id" maxLength:"64"`
}

func webhookScope(k store.AppKey) store.WebhookScope {
	return store.WebhookScope{OrgID: k.OrganizationID, SubOrgID: k.SubOrganizationID}
}

func endpointBody(e store.WebhookEndpoint) WebhookEndpointBody {
	types := e.EventTypes
	if types == nil {
		types = []string{}
	}
	return WebhookEndpointBody{ID: e.ID, URL: e.URL, Description: e.Description, EventTypes: types, Enabled: e.Enabled,
		DisabledReason: e.DisabledReason, SubOrganizationID: e.SubOrgID, CreatedAt: ts(e.CreatedAt), UpdatedAt: ts(e.UpdatedAt)}
}

func (s *Server) registerWebhooks(api huma.API) {
	tags := []string{"App engine: webhooks"}
	huma.Register(api, op(huma.Operation{
		OperationID: "create-webhook-endpoint", Method: http.MethodPost, Path: "/webhooks/endpoints", Tags: tags,
		Summary:       "Create a webhook endpoint",
		Description:   "Registers a receiver for the organization's events (a sub-organization key: its sub-organization's events only). In production the URL must be https and resolve to public addresses only. The signing secret is shown once.",
		DefaultStatus: http.StatusCreated, Security: needsAppKey,
	}), s.createWebhookEndpoint)

	huma.Register(api, op(huma.Operation{
		OperationID: "list-webhook-endpoints", Method: http.MethodGet, Path: "/webhooks/endpoints", Tags: tags,
		Summary:     "List webhook endpoints",
		Description: "The endpoints within the key's scope, oldest first. Never the secrets.",
		Security:    needsAppKey,
	}), s.listWebhookEndpoints)

	huma.Register(api, op(huma.Operation{
		OperationID: "get-webhook-endpoint", Method: http.MethodGet, Path: "/webhooks/endpoints/{endpoint_id}", Tags: tags,
		Summary: "Get a webhook endpoint", Security: needsAppKey,
	}), s.getWebhookEndpoint)

	huma.Register(api, op(huma.Operation{
		OperationID: "update-webhook-endpoint", Method: http.MethodPatch, Path: "/webhooks/endpoints/{endpoint_id}", Tags: tags,
		Summary:     "Update a webhook endpoint",
		Description: "Changes the fields given. `enabled: true` re-enables an endpoint the service disabled; deliveries that failed meanwhile can be sent again with the redeliver operation.",
		Security:    needsAppKey,
	}), s.updateWebhookEndpoint)

	huma.Register(api, op(huma.Operation{
		OperationID: "delete-webhook-endpoint", Method: http.MethodDelete, Path: "/webhooks/endpoints/{endpoint_id}", Tags: tags,
		Summary:       "Delete a webhook endpoint",
		Description:   "Its pending deliveries stop (they end `failed`, last_error `endpoint deleted`).",
		DefaultStatus: http.StatusNoContent, Security: needsAppKey,
	}), s.deleteWebhookEndpoint)

	huma.Register(api, op(huma.Operation{
		OperationID: "rotate-webhook-secret", Method: http.MethodPost, Path: "/webhooks/endpoints/{endpoint_id}/rotate-secret", Tags: tags,
		Summary:     "Rotate a webhook endpoint's secret",
		Description: "Returns the new secret, shown once. For 24 hours deliveries carry two signatures, one with each secret, so the receiver can switch at its own pace.",
		Security:    needsAppKey,
	}), s.rotateWebhookSecret)

	huma.Register(api, op(huma.Operation{
		OperationID: "test-webhook-endpoint", Method: http.MethodPost, Path: "/webhooks/endpoints/{endpoint_id}/test", Tags: tags,
		Summary:       "Send a test event",
		Description:   "Records a `webhook.test` event delivered to this endpoint only (whatever its event types). 409 when the endpoint is disabled.",
		DefaultStatus: http.StatusAccepted, Security: needsAppKey,
	}), s.testWebhookEndpoint)

	s.registerWebhookLogs(api, tags)
}

func (s *Server) createWebhookEndpoint(ctx context.Context, in *struct {
	Body CreateWebhookEndpointRequest
}) (*struct{ Body CreatedWebhookEndpoint }, error) {
	k := appKey(ctx)
	if err := s.checkWebhookURL(ctx, in.Body.URL); err != nil {
		return nil, s.appError(ctx, "webhook endpoint", err)
	}
	if err := checkEventTypes(in.Body.EventTypes); err != nil {
		return nil, s.appError(ctx, "webhook endpoint", err)
	}
	secret, key := webhook.NewSecret()
	id := uuid.New()
	enabled := in.Body.Enabled == nil || *in.Body.Enabled
	e, err := s.deps.Store.CreateWebhookEndpoint(ctx, store.WebhookEndpoint{ID: id, OrgID: k.OrganizationID,
		SubOrgID: k.SubOrganizationID, URL: in.Body.URL, Description: in.Body.Description, EventTypes: dedupe(in.Body.EventTypes),
		Enabled: enabled, SecretSealed: s.deps.Keyring.Seal(keyring.WebhookSecretPurpose(id), key)})
	if err != nil {
		return nil, s.appError(ctx, "webhook endpoint", err)
	}
	return &struct{ Body CreatedWebhookEndpoint }{Body: CreatedWebhookEndpoint{WebhookEndpointBody: endpointBody(e), Secret: secret}}, nil
}

func (s *Server) listWebhookEndpoints(ctx context.Context, _ *struct{}) (*struct{ Body []WebhookEndpointBody }, error) {
	list, err := s.deps.Store.WebhookEndpoints(ctx, webhookScope(appKey(ctx)))
	if err != nil {
		return nil, s.appError(ctx, "webhook endpoints", err)
	}
	return &struct{ Body []WebhookEndpointBody }{Body: bodies(list, endpointBody)}, nil
}

func (s *Server) getWebhookEndpoint(ctx context.Context, in *endpointPath) (*struct{ Body WebhookEndpointBody }, error) {
	id, err := parseEndpointID(in.EndpointID)
	if err != nil {
		return nil, s.appError(ctx, "webhook endpoint", err)
	}
	e, err := s.deps.Store.WebhookEndpoint(ctx, webhookScope(appKey(ctx)), id)
	if err != nil {
		return nil, s.appError(ctx, "webhook endpoint", err)
	}
	return &struct{ Body WebhookEndpointBody }{Body: endpointBody(e)}, nil
}

func (s *Server) updateWebhookEndpoint(ctx context.Context, in *struct {
	EndpointID string `path:"endpoint_id" maxLength:"64"`
	Body       UpdateWebhookEndpointRequest
}) (*struct{ Body WebhookEndpointBody }, error) {
	id, err := parseEndpointID(in.EndpointID)
	if err != nil {
		return nil, s.appError(ctx, "webhook endpoint", err)
	}
	if in.Body.URL != nil {
		if err := s.checkWebhookURL(ctx, *in.Body.URL); err != nil {
			return nil, s.appError(ctx, "webhook endpoint", err)
		}
	}
	p := store.WebhookEndpointPatch{URL: in.Body.URL, Description: in.Body.Description, Enabled: in.Body.Enabled}
	if in.Body.EventTypes != nil {
		if err := checkEventTypes(*in.Body.EventTypes); err != nil {
			return nil, s.appError(ctx, "webhook endpoint", err)
		}
		types := dedupe(*in.Body.EventTypes)
		p.EventTypes = &types
	}
	e, err := s.deps.Store.UpdateWebhookEndpoint(ctx, webhookScope(appKey(ctx)), id, p)
	if err != nil {
		return nil, s.appError(ctx, "webhook endpoint", err)
	}
	return &struct{ Body WebhookEndpointBody }{Body: endpointBody(e)}, nil
}

func (s *Server) deleteWebhookEndpoint(ctx context.Context, in *endpointPath) (*struct{}, error) {
	id, err := parseEndpointID(in.EndpointID)
	if err != nil {
		return nil, s.appError(ctx, "webhook endpoint", err)
	}
	if err := s.deps.Store.DeleteWebhookEndpoint(ctx, webhookScope(appKey(ctx)), id); err != nil {
		return nil, s.appError(ctx, "webhook endpoint", err)
	}
	return nil, nil
}

func (s *Server) rotateWebhookSecret(ctx context.Context, in *endpointPath) (*struct {
	Body struct {
		Secret string `json:"secret"`
	}
}, error) {
	id, err := parseEndpointID(in.EndpointID)
	if err != nil {
		return nil, s.appError(ctx, "webhook endpoint", err)
	}
	secret, key := webhook.NewSecret()
	overlap := s.deps.Webhooks.RotationOverlap
	if overlap == 0 {
		overlap = 24 * time.Hour
	}
	if err := s.deps.Store.RotateWebhookSecret(ctx, webhookScope(appKey(ctx)), id,
		s.deps.Keyring.Seal(keyring.WebhookSecretPurpose(id), key), time.Now().Add(overlap)); err != nil {
		return nil, s.appError(ctx, "webhook endpoint", err)
	}
	out := &struct {
		Body struct {
			Secret string `json:"secret"`
		}
	}{}
	out.Body.Secret = secret
	return out, nil
}

func (s *Server) testWebhookEndpoint(ctx context.Context, in *endpointPath) (*struct {
	Body struct {
		EventID string `json:"event_id"`
	}
}, error) {
	id, err := parseEndpointID(in.EndpointID)
	if err != nil {
		return nil, s.appError(ctx, "webhook endpoint", err)
	}
	sc := webhookScope(appKey(ctx))
	e, err := s.deps.Store.WebhookEndpoint(ctx, sc, id)
	if err != nil {
		return nil, s.appError(ctx, "webhook endpoint", err)
	}
	if !e.Enabled {
		return nil, s.appError(ctx, "webhook endpoint", errEndpointDisabled)
	}
	evID, err := s.deps.Store.RecordEvent(ctx, store.Event{OrgID: e.OrgID, SubOrgID: e.SubOrgID, Type: "webhook.test", Only: &e.ID,
		Data: map[string]any{"endpoint_id": e.ID, "message": "a test event sent through the API"}})
	if err != nil {
		return nil, s.appError(ctx, "webhook test", err)
	}
	if evID == uuid.Nil {
		// Deleted between the read above and the record.
		return nil, s.appError(ctx, "webhook endpoint", errNotFound("webhook endpoint: not found"))
	}
	out := &struct {
		Body struct {
			EventID string `json:"event_id"`
		}
	}{}
	out.Body.EventID = webhook.EventIDPrefix + evID.String()
	return out, nil
}

// checkWebhookURL applies the deployment's URL policy; its error names the rule broken.
func (s *Server) checkWebhookURL(ctx context.Context, raw string) error {
	if err := s.deps.Webhooks.Policy.CheckURL(ctx, raw); err != nil {
		return invalidField("url: "+strings.TrimPrefix(err.Error(), webhook.ErrURL.Error()+": "), "body.url", raw, err.Error())
	}
	return nil
}

func checkEventTypes(types []string) error {
	for i, t := range types {
		if !webhook.KnownType(t) {
			return invalidField("event_types: unknown event type "+strconv.Quote(t), fmt.Sprintf("body.event_types[%d]", i), t,
				"expected one of "+strings.Join(webhook.Types, ", "))
		}
	}
	return nil
}

func dedupe(types []string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, t := range types {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

func parseEndpointID(raw string) (uuid.UUID, error) {
	id, err := uuid.Parse(raw)
	if err != nil {
		return uuid.Nil, errNotFound("webhook endpoint: not found")
	}
	return id, nil
}
