package apiserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/towerproto"
)

// SessionTokenRequest is what the SDK asks a session with. version is the tower's firmware
// as the SDK read it over BLE: present, empty or absent. Properties it does not know are
// ignored, as in every /sdk/v1 body (DESIGN §8).
type SessionTokenRequest struct {
	_        struct{} `additionalProperties:"true"`
	Duration int      `json:"duration" minimum:"1" maximum:"86400" doc:"Seconds the session stays valid; the SDK reuses it that long"`
	Claims   []string `json:"claims" minItems:"1" maxItems:"6" enum:"sync_packet,locker_pickup,locker_delivery,owner,technician,developer" doc:"What the session is for (Harbor's SDKs send one)"`
	Version  *string  `json:"version,omitempty" maxLength:"64" nullable:"true" doc:"The tower's firmware version as the SDK read it; may be empty or absent"`
}

// SessionTokenBody is a session sealed for one tower. Field names are snake_case as Harbor's
// SDKs read them.
type SessionTokenBody struct {
	Payload     string `json:"payload" doc:"Even-length hex: the session sealed for the tower (only it can read it)"`
	PayloadAuth string `json:"payload_auth" doc:"Even-length hex: 00 + the tag that proves the payload came from the cloud"`
	SessionSeed string `json:"session_seed" doc:"Even-length hex: the session's secret the phone and the tower derive their channel keys from"`
	TowerID     string `json:"tower_id" doc:"The tower id exactly as the path gave it"`
}

func (s *Server) registerSDKSessions(api huma.API) {
	huma.Register(api, op(huma.Operation{
		OperationID: "create-tower-session", Method: http.MethodPost, Path: "/sdk/v1/towers/{tower_id}/session-token", Tags: []string{sdkTag},
		Summary: "Open a session with a tower",
		Description: "Seals a session for the tower: the app's client and user, the permission of the claim, the session key and its validity. " +
			"The SDK hands payload and payload_auth to the tower over BLE and keeps session_seed to derive the channel keys. " +
			"A claim the client may not use answers 403; a tower of another organization 404.",
		Security: needs(jwtauth.ScopeTowerAccess),
	}), s.createTowerSession)
}

// allowedClaims returns the claims the caller's client may ask for; a client that no longer
// exists or is disabled cannot open sessions. The caller maps its errors.
func (s *Server) allowedClaims(ctx context.Context, clientID string) ([]string, error) {
	claims, disabled, err := s.deps.Store.ClientSDKClaims(ctx, clientID)
	switch {
	case errors.Is(err, store.ErrNotFound) || err == nil && disabled:
		return nil, errUnauthenticated("the token's client is unknown or disabled")
	case err != nil:
		return nil, err
	case claims == nil:
		return s.sdk.DefaultClaims, nil
	}
	return claims, nil
}

// createTowerSession answers POST /sdk/v1/towers/{tower_id}/session-token.
func (s *Server) createTowerSession(ctx context.Context, in *struct {
	TowerPath
	Body SessionTokenRequest
}) (*struct{ Body SessionTokenBody }, error) {
	pathTowerID, req := in.TowerID, in.Body
	p := principal(ctx)
	var version *string
	if req.Version != nil && *req.Version != "" {
		if err := sdkText("version", *req.Version); err != nil {
			return nil, s.sdkError(ctx, "session", err)
		}
		version = req.Version
	}
	tower, secret, err := s.tower(ctx, p.OrgID, pathTowerID)
	if err != nil {
		return nil, s.sdkError(ctx, "tower", err)
	}
	claims, err := towerproto.ParseClaims(strings.Join(req.Claims, ","))
	if err != nil {
		return nil, s.sdkError(ctx, "session", invalidInput(err.Error()))
	}
	allowed, err := s.allowedClaims(ctx, p.ClientID)
	if err != nil {
		return nil, s.sdkError(ctx, "client", err)
	}
	for _, c := range claims {
		if !slices.Contains(allowed, c) {
			return nil, s.sdkError(ctx, "session",
				errForbidden(fmt.Sprintf("this client may not open %s sessions (allowed: %s)", c, strings.Join(allowed, ", "))))
		}
	}
	perm, err := towerproto.ClaimsPermission(claims)
	if err != nil {
		return nil, s.sdkError(ctx, "session", invalidInput(err.Error()))
	}

	now := time.Now().UTC().Truncate(time.Second)
	sess := towerproto.Session{ID: uuid.New(), TowerID: tower.ID, ClientID: p.ClientID, Claims: claims, Permission: perm,
		Seed: make([]byte, towerproto.SeedSize), IssuedAt: now, ExpiresAt: now.Add(time.Duration(req.Duration) * time.Second)}
	if p.Subject != "" && p.Subject != p.ClientID {
		sess.UserID = p.Subject // a user of the app, from login/authorize
	}
	if _, err := rand.Read(sess.Seed); err != nil {
		return nil, s.sdkError(ctx, "session", fmt.Errorf("generate session seed: %w", err))
	}
	payload, auth, err := towerproto.SealSession(sess, towerproto.SessionKey(secret), rand.Reader)
	if err != nil {
		return nil, s.sdkError(ctx, "session", err)
	}
	rec := store.TowerSession{ID: sess.ID, TowerID: tower.ID, OrganizationID: p.OrgID, ClientID: p.ClientID, Claims: claims,
		Permission: int32(perm), FirmwareVersion: version, IssuedAt: sess.IssuedAt, ExpiresAt: sess.ExpiresAt}
	if sess.UserID != "" {
		rec.UserID = &sess.UserID
	}
	if err := s.deps.Store.RecordTowerSession(ctx, rec); err != nil {
		return nil, s.sdkError(ctx, "session", err)
	}
	for _, c := range claims {
		s.sdkMetrics.sessions.WithLabelValues(c).Inc()
	}
	s.logger.InfoContext(ctx, "tower session sealed", slog.String("tower_id", tower.ID), slog.String("session_id", uuid.UUID(sess.ID).String()),
		slog.String("client_id", p.ClientID), slog.Any("claims", claims), slog.Time("expires_at", sess.ExpiresAt))
	return &struct{ Body SessionTokenBody }{Body: SessionTokenBody{Payload: payload, PayloadAuth: auth, SessionSeed: hex.EncodeToString(sess.Seed), TowerID: pathTowerID}}, nil
}
