package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/towerproto"
	"github.com/lockernet/lockernet/workflows/contract"
)

// MaxEventBatches bounds one upload (the 64 KiB body limit bounds it anyway).
const MaxEventBatches = 64

// EventBatch is one signed batch of tower events as the SDK uploads it.
type EventBatch struct {
	SyncEventStart int64  `json:"syncEventStart" minimum:"0" doc:"Sequence number of the first event in the batch (for an empty batch, the tower's next one, or 0)"`
	SyncEventCount int    `json:"syncEventCount" minimum:"0" maximum:"65535" doc:"Events in the batch; 0 for the SDK's pull of an empty log"`
	Payload        string `json:"payload" maxLength:"65536" doc:"Even-length hex in either case, signed by the tower (may be empty when syncEventCount is 0)"`
	PayloadAuth    string `json:"payloadAuth" maxLength:"256" doc:"Even-length hex in either case: 00 + HMAC-SHA256 of the payload with the tower's event key"`
}

// SDKEventBatch is an EventBatch as the mobile SDK sends it: properties it does not know are
// ignored (DESIGN §8: the SDK is not ours to version), where the tower API refuses them.
type SDKEventBatch struct {
	_ struct{} `additionalProperties:"true"`
	EventBatch
}

// EventsResult tells how many events were new and how many had been received before.
type EventsResult struct {
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
}

// SDKEventsResult is EventsResult with the message Harbor's SDKs read (DESIGN §4.8).
type SDKEventsResult struct {
	Msg        string `json:"msg" example:"3 events stored, 0 already known"`
	Accepted   int    `json:"accepted"`
	Duplicates int    `json:"duplicates"`
}

func (s *Server) registerEvents(api huma.API) {
	desc := "Signed batches of tower events, relayed by the mobile SDK. Each batch is verified (MAC with the tower's event key, tower id, " +
		"sequence range); a verified token use moves the locker (drop-off with the item inside → occupied, pickup closed empty → available, ...). " +
		"Replays and out-of-order batches are idempotent. A batch that fails verification rejects the whole upload with 422."
	huma.Register(api, op(huma.Operation{
		OperationID: "upload-tower-events", Method: http.MethodPost, Path: "/api/v1/towers/{tower_id}/events", Tags: []string{"Tower events"},
		Summary: "Upload tower events", Description: desc, Security: needs(jwtauth.ScopeTowerAccess),
	}), s.uploadTowerEvents)
	huma.Register(api, op(huma.Operation{
		OperationID: "upload-tower-events-sdk", Method: http.MethodPost, Path: "/sdk/v1/towers/{tower_id}/events", Tags: []string{sdkTag},
		Summary: "Upload tower events",
		Description: "The same operation as POST /api/v1/towers/{tower_id}/events, at the path the mobile SDK uses (at most 5 batches " +
			"per call from the SDK; hex in either case; a batch of no events, the SDK's pull of an empty log, is accepted). " +
			"Uploading the same events again changes nothing: the SDK does so until the tower's commands acknowledge them.",
		Security: needs(jwtauth.ScopeTowerAccess),
	}), s.uploadSDKTowerEvents)
}

// uploadTowerEvents answers POST /api/v1/towers/{tower_id}/events.
func (s *Server) uploadTowerEvents(ctx context.Context, in *struct {
	TowerPath
	Body []EventBatch `maxItems:"64"`
}) (*struct{ Body EventsResult }, error) {
	res, err := s.uploadEvents(ctx, in.TowerID, in.Body)
	if err != nil {
		return nil, err
	}
	return &struct{ Body EventsResult }{Body: res}, nil
}

// uploadSDKTowerEvents answers POST /sdk/v1/towers/{tower_id}/events: the same upload, in the answer the SDK reads.
func (s *Server) uploadSDKTowerEvents(ctx context.Context, in *struct {
	TowerPath
	Body []SDKEventBatch `maxItems:"64"`
}) (*struct{ Body SDKEventsResult }, error) {
	batches := make([]EventBatch, len(in.Body))
	for i, b := range in.Body {
		batches[i] = b.EventBatch
	}
	res, err := s.uploadEvents(ctx, in.TowerID, batches)
	if err != nil {
		return nil, err
	}
	return &struct{ Body SDKEventsResult }{Body: SDKEventsResult{
		Msg:      fmt.Sprintf("%d events stored, %d already known", res.Accepted, res.Duplicates),
		Accepted: res.Accepted, Duplicates: res.Duplicates}}, nil
}

func (s *Server) uploadEvents(ctx context.Context, towerID string, batches []EventBatch) (EventsResult, error) {
	p := principal(ctx)
	tower, secret, err := s.tower(ctx, p.OrgID, towerID)
	if err != nil {
		return EventsResult{}, s.towerError(ctx, "tower", err)
	}
	key := towerproto.EventKey(secret)
	var events []store.TowerEvent
	for i, b := range batches {
		if b.SyncEventCount == 0 && b.Payload == "" && b.PayloadAuth == "" {
			continue // an empty pull whose tower signed nothing: nothing to verify, nothing to store
		}
		env := towerproto.BatchEnvelope{SyncEventStart: uint64(b.SyncEventStart), SyncEventCount: b.SyncEventCount,
			Payload: b.Payload, PayloadAuth: b.PayloadAuth}
		if id, err := towerproto.PeekBatchTower(env); err == nil && id != tower.ID {
			return EventsResult{}, s.towerError(ctx, "tower events", invalidInput(fmt.Sprintf("batch %d was signed by tower %s, not %s", i, id, tower.ID)))
		}
		batch, err := towerproto.DecodeBatch(env, key)
		if err != nil {
			reason := "malformed"
			if errors.Is(err, towerproto.ErrBadMAC) {
				reason = "signature does not verify"
			}
			return EventsResult{}, s.towerError(ctx, "tower events",
				invalidField(fmt.Sprintf("batch %d: %s", i, reason), fmt.Sprintf("body[%d]", i), nil, err.Error()))
		}
		for _, e := range batch.Events {
			if e.Seq > math.MaxInt64 {
				return EventsResult{}, s.towerError(ctx, "tower events", invalidInput(fmt.Sprintf("batch %d: sequence number %d is out of range", i, e.Seq)))
			}
			ev := store.TowerEvent{BootEpoch: int64(batch.BootEpoch), Seq: int64(e.Seq), Kind: e.Kind.String(), At: e.At,
				LockerID: e.LockerID, Generation: int32(e.Generation), ItemInside: e.ItemInside, Command: int64(e.Command)}
			if id := uuid.UUID(e.TokenID); id != uuid.Nil {
				ev.TokenID = &id
			}
			events = append(events, ev)
		}
	}
	if len(events) == 0 {
		return EventsResult{}, nil
	}
	var res store.ApplyResult
	err = s.record(ctx, func(tx *store.Store) ([]store.OutboxItem, error) {
		var err error
		if res, err = tx.ApplyTowerEvents(ctx, tower.ID, events); err != nil {
			return nil, err
		}
		used := make([]uuid.UUID, len(res.Uses))
		for i, u := range res.Uses {
			used[i] = u.TokenID
		}
		items, err := outbox.EndTokens(ctx, tx, p.OrgID, used, contract.TokenOutcomeUsed)
		if err != nil {
			return nil, err
		}
		revoked, err := outbox.EndTokens(ctx, tx, p.OrgID, res.Revoked, contract.TokenOutcomeRevoked)
		items = append(items, outbox.PickupWindowItems(res.Uses)...)
		return append(items, revoked...), err
	})
	if err != nil {
		return EventsResult{}, s.towerError(ctx, "tower events", err)
	}
	for _, u := range res.Uses {
		s.metrics.tokenUses.WithLabelValues(u.Outcome).Inc()
		if u.Outcome == store.UseAnomaly {
			s.logger.WarnContext(ctx, "tower event anomaly", slog.String("tower_id", tower.ID), slog.Int64("locker_id", u.LockerID),
				slog.String("token_id", u.TokenID.String()), slog.String("detail", u.Detail))
		}
	}
	return EventsResult{Accepted: res.Accepted, Duplicates: res.Duplicates}, nil
}
