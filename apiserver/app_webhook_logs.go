package apiserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/webhook"
)

// WebhookDeliveryBody is an entry of an endpoint's delivery log.
type WebhookDeliveryBody struct {
	ID             uuid.UUID  `json:"id"`
	EventID        string     `json:"event_id"`
	EventType      string     `json:"event_type"`
	Status         string     `json:"status" enum:"pending,succeeded,failed"`
	Attempts       int        `json:"attempts"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      *string    `json:"last_error"`
	NextAttemptAt  *Timestamp `json:"next_attempt_at" nullable:"true"`
	CreatedAt      Timestamp  `json:"created_at"`
	CompletedAt    *Timestamp `json:"completed_at" nullable:"true"`
}

// WebhookDeliveryPage is one page of a delivery log.
type WebhookDeliveryPage struct {
	Data       []WebhookDeliveryBody `json:"data"`
	NextCursor *string               `json:"next_cursor" doc:"Pass as cursor for the next page; null on the last"`
}

// WebhookEventBody is an event as delivered.
type WebhookEventBody struct {
	ID                string          `json:"id" doc:"evt_<uuid>, the webhook-id header of its deliveries"`
	Type              string          `json:"type"`
	CreatedAt         string          `json:"created_at"`
	OrganizationID    int64           `json:"organization_id"`
	SubOrganizationID *int64          `json:"sub_organization_id"`
	Data              json.RawMessage `json:"data"`
}

// WebhookEventPage is one page of the event log.
type WebhookEventPage struct {
	Data       []WebhookEventBody `json:"data"`
	NextCursor *string            `json:"next_cursor" doc:"Pass as cursor for the next page; null on the last"`
}

// registerWebhookLogs registers the delivery log, redelivery and the event log.
func (s *Server) registerWebhookLogs(api huma.API, tags []string) {
	huma.Register(api, op(huma.Operation{
		OperationID: "list-webhook-deliveries", Method: http.MethodGet, Path: "/webhooks/endpoints/{endpoint_id}/deliveries", Tags: tags,
		Summary:     "An endpoint's delivery log",
		Description: "Newest first. `status` filters (pending, succeeded, failed); `limit` 1..100 (default 20); `cursor` is the previous page's `next_cursor`.",
		Security:    needsAppKey,
	}), s.listWebhookDeliveries)

	huma.Register(api, op(huma.Operation{
		OperationID: "redeliver-webhook", Method: http.MethodPost, Path: "/webhooks/deliveries/{delivery_id}/retry", Tags: tags,
		Summary:       "Redeliver",
		Description:   "A new attempt now, with the same webhook-id, and the retry schedule again if it fails. 409 when the endpoint is disabled.",
		DefaultStatus: http.StatusAccepted, Security: needsAppKey,
	}), s.redeliverWebhook)

	huma.Register(api, op(huma.Operation{
		OperationID: "list-webhook-events", Method: http.MethodGet, Path: "/webhooks/events", Tags: tags,
		Summary:     "The event log",
		Description: "The organization's events (a sub-organization key: its sub-organization's), newest first, kept 30 days, so a receiver that was down can catch up. `type` filters by event type; `since` (RFC 3339) keeps events created at or after it; `limit` 1..100 (default 20); `cursor` is the previous page's `next_cursor`.",
		Security:    needsAppKey,
	}), s.listWebhookEvents)
}

// listWebhookDeliveries answers GET /webhooks/endpoints/{endpoint_id}/deliveries.
func (s *Server) listWebhookDeliveries(ctx context.Context, in *struct {
	EndpointID string `path:"endpoint_id" maxLength:"64"`
	Status     string `query:"status" maxLength:"16" doc:"pending, succeeded or failed; empty: all"`
	Limit      string `query:"limit" maxLength:"8"`
	Cursor     string `query:"cursor" maxLength:"128"`
}) (*struct{ Body WebhookDeliveryPage }, error) {
	id, err := parseEndpointID(in.EndpointID)
	if err != nil {
		return nil, s.appError(ctx, "webhook endpoint", err)
	}
	switch in.Status {
	case "", "pending", "succeeded", "failed":
	default:
		return nil, s.appError(ctx, "webhook deliveries", invalidField("status: expected pending, succeeded or failed",
			"query.status", in.Status, "expected pending, succeeded or failed"))
	}
	f := store.DeliveryFilter{Scope: webhookScope(appKey(ctx)), EndpointID: id, Status: in.Status}
	list, next, err := readLogPage(in.Limit, in.Cursor, func(limit int, after *store.Cursor) ([]store.WebhookDelivery, error) {
		f.Limit, f.After = limit, after
		return s.deps.Store.WebhookDeliveries(ctx, f)
	}, func(d store.WebhookDelivery) store.Cursor { return store.Cursor{At: d.CreatedAt, ID: d.ID} })
	if err != nil {
		return nil, s.appError(ctx, "webhook endpoint", err)
	}
	return &struct{ Body WebhookDeliveryPage }{Body: WebhookDeliveryPage{Data: bodies(list, deliveryBody), NextCursor: next}}, nil
}

// redeliverWebhook answers POST /webhooks/deliveries/{delivery_id}/retry.
func (s *Server) redeliverWebhook(ctx context.Context, in *struct {
	DeliveryID string `path:"delivery_id" maxLength:"64"`
}) (*struct{ Body WebhookDeliveryBody }, error) {
	id, err := uuid.Parse(in.DeliveryID)
	if err != nil {
		return nil, s.appError(ctx, "webhook delivery", errNotFound("webhook delivery: not found"))
	}
	d, err := s.deps.Store.RetryWebhookDelivery(ctx, webhookScope(appKey(ctx)), id)
	if errors.Is(err, store.ErrConflict) {
		err = errEndpointDisabled
	}
	if err != nil {
		return nil, s.appError(ctx, "webhook delivery", err)
	}
	return &struct{ Body WebhookDeliveryBody }{Body: deliveryBody(d)}, nil
}

// listWebhookEvents answers GET /webhooks/events.
func (s *Server) listWebhookEvents(ctx context.Context, in *struct {
	Type   string `query:"type" maxLength:"64"`
	Since  string `query:"since" maxLength:"64"`
	Limit  string `query:"limit" maxLength:"8"`
	Cursor string `query:"cursor" maxLength:"128"`
}) (*struct{ Body WebhookEventPage }, error) {
	if in.Type != "" && !webhook.KnownType(in.Type) {
		return nil, s.appError(ctx, "webhook events", invalidField("type: unknown event type",
			"query.type", in.Type, "expected one of "+strings.Join(webhook.Types, ", ")))
	}
	f := store.EventFilter{Scope: webhookScope(appKey(ctx)), Type: in.Type}
	if in.Since != "" {
		t, err := time.Parse(time.RFC3339Nano, in.Since)
		if err != nil {
			return nil, s.appError(ctx, "webhook events", invalidField("since: expected an RFC 3339 time",
				"query.since", in.Since, "expected an RFC 3339 time such as 2026-01-02T15:04:05Z"))
		}
		f.Since = &t
	}
	list, next, err := readLogPage(in.Limit, in.Cursor, func(limit int, after *store.Cursor) ([]store.WebhookEvent, error) {
		f.Limit, f.After = limit, after
		return s.deps.Store.WebhookEvents(ctx, f)
	}, func(e store.WebhookEvent) store.Cursor { return store.Cursor{At: e.CreatedAt, ID: e.ID} })
	if err != nil {
		return nil, s.appError(ctx, "webhook events", err)
	}
	return &struct{ Body WebhookEventPage }{Body: WebhookEventPage{Data: bodies(list, eventBody), NextCursor: next}}, nil
}

func eventBody(e store.WebhookEvent) WebhookEventBody {
	return WebhookEventBody(webhook.NewPayload(e.ID, e.Type, e.CreatedAt, e.OrgID, e.SubOrgID, e.Data))
}

func deliveryBody(d store.WebhookDelivery) WebhookDeliveryBody {
	b := WebhookDeliveryBody{ID: d.ID, EventID: webhook.EventIDPrefix + d.EventID.String(), EventType: d.EventType, Status: d.Status,
		Attempts: d.Attempts, LastStatusCode: d.LastStatusCode, LastError: d.LastError, CreatedAt: ts(d.CreatedAt)}
	if d.Status == "pending" {
		b.NextAttemptAt = optTS(d.NextAttemptAt)
	}
	b.CompletedAt = optTS(d.CompletedAt)
	return b
}

// readLogPage reads one page of a newest-first log (the delivery and event logs) after the
// operation's own parameters were checked: rawLimit (1..100, default 20) and rawCursor (a
// next_cursor this API returned) are checked here, each a 422 of its own. read is asked for
// one entry more than the limit, so that a next page shows; pos is an entry's position,
// which the next page's opaque cursor holds (nil on the last page).
func readLogPage[T any](rawLimit, rawCursor string, read func(limit int, after *store.Cursor) ([]T, error),
	pos func(T) store.Cursor) ([]T, *string, error) {
	limit, err := pageParam("limit", rawLimit, 20, 100)
	if err != nil {
		return nil, nil, err
	}
	after, err := parseCursor(rawCursor)
	if err != nil {
		return nil, nil, err
	}
	list, err := read(limit+1, after)
	if err != nil || len(list) <= limit {
		return list, nil, err
	}
	list = list[:limit]
	c := pos(list[limit-1])
	next := base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.At.UnixMicro(), 10) + "." + c.ID.String()))
	return list, &next, nil
}

// parseCursor reads a cursor readLogPage wrote (nil for an empty one: the first page).
func parseCursor(raw string) (*store.Cursor, error) {
	if raw == "" {
		return nil, nil
	}
	bad := invalidField("cursor: not a cursor this API returned", "query.cursor", raw, "pass the next_cursor of the previous page")
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return nil, bad
	}
	at, id, ok := strings.Cut(string(b), ".")
	if !ok {
		return nil, bad
	}
	us, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return nil, bad
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return nil, bad
	}
	return &store.Cursor{At: time.UnixMicro(us), ID: u}, nil
}
