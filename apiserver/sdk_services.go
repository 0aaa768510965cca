package apiserver

import (
	"context"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/store"
)

// BLEServiceBody is a BLE service the SDK scans for.
type BLEServiceBody struct {
	Name string `json:"name" example:"tower"`
	UUID string `json:"uuid" example:"6f3c2a10-8e4b-4d1f-9a52-1c7e5b0d9a01"`
}

// SDKLoginRequest documents the form of POST /sdk/v1/login/access-token.
type SDKLoginRequest struct {
	Username string `json:"username" doc:"A service-provider client's id"`
	Password string `json:"password" doc:"Its secret"`
}

// SDKLoginBody is the SDK's access token. token_type is lower-case, as Harbor's answers.
type SDKLoginBody struct {
	AccessToken string `json:"access_token" doc:"A tower_access token"`
	TokenType   string `json:"token_type" example:"bearer"`
}

// ResetEventsRequest says why a tower's event log was reset.
type ResetEventsRequest struct {
	_      struct{} `additionalProperties:"true"` // properties it does not know are ignored (DESIGN §8)
	Reason string   `json:"reason,omitempty" maxLength:"1000" doc:"Why the SDK reset the tower's event log"`
}

// SDKTowerBody is the tower object Harbor's SDKs read.
type SDKTowerBody struct {
	ID           string `json:"id" example:"0100000000000014"`
	Name         string `json:"name"`
	Description  string `json:"description" doc:"Where the tower stands"`
	SystemID     int64  `json:"systemId" doc:"The system the tower belongs to, a number as Harbor's SDK model declares it: the id of the tower's organization"`
	TowerModelID int    `json:"towerModelId" doc:"1: the one tower model this service drives"`
	LocationID   int64  `json:"locationId"`
	PinCode      string `json:"pinCode" doc:"The postal code of the tower's location"`
	AccessModeID int    `json:"accessModeId" doc:"1: public"`
	IsForTest    bool   `json:"isForTest" doc:"true outside production"`
}

// Values of the tower object this service has only one of.
const (
	towerModelStandard = 1
	accessModePublic   = 1
)

type sdkLoginOutput struct {
	Status       int
	CacheControl string `header:"Cache-Control"`
	// The client's token budget (DESIGN §4.8, §8), as on every answer once its secret was right.
	// The document declares them as on every rate-limited answer (finishOpenAPI), as integers.
	RateLimitLimit     string `header:"X-RateLimit-Limit" hidden:"true"`
	RateLimitRemaining string `header:"X-RateLimit-Remaining" hidden:"true"`
	RateLimitReset     string `header:"X-RateLimit-Reset" hidden:"true"`
	Body               SDKLoginBody
}

func (s *Server) registerSDKServices(api huma.API) {
	huma.Register(api, op(huma.Operation{
		OperationID: "list-ble-services", Method: http.MethodGet, Path: "/sdk/v1/services/", Tags: []string{sdkTag},
		Summary: "BLE services the SDK scans for", Description: "The trailing slash is part of the path, as the SDKs call it.",
		Security: needs(jwtauth.ScopeTowerAccess),
	}), s.listBLEServices)

	reg := api.OpenAPI().Components.Schemas
	huma.Register(api, op(huma.Operation{
		OperationID: "sdk-login", Method: http.MethodPost, Path: "/sdk/v1/login/access-token", Tags: []string{sdkTag},
		Summary: "Get a tower_access token for the SDK",
		Description: "Form username and password: a service-provider client's id and secret (there are no end-user accounts). " +
			"Anything else answers 401. It shares the token endpoint's budget per client (429 + Retry-After past it), and wrong " +
			"passwords are limited per (username, source address) with a growing back-off (429 + Retry-After).",
		RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{
			"application/x-www-form-urlencoded": {Schema: reg.Schema(reflect.TypeFor[SDKLoginRequest](), true, "SDKLoginRequest")},
		}},
		SkipValidateBody: true,
		Errors:           []int{http.StatusUnauthorized, http.StatusUnprocessableEntity, http.StatusTooManyRequests},
	}), s.sdkLogin)

	huma.Register(api, op(huma.Operation{
		OperationID: "reset-tower-events", Method: http.MethodPost, Path: "/sdk/v1/towers/{tower_id}/reset-events", Tags: []string{sdkTag},
		Summary: "Record that a tower's event log was reset",
		Description: "The SDK reports that it reset the tower's event log (the events not yet uploaded are lost; a new boot epoch follows). " +
			"Operators see the reports (lockernet-admin tower events-resets). A repeat of the same report within a minute counts as one.",
		Security: needs(jwtauth.ScopeTowerAccess),
	}), s.resetTowerEvents)
}

// listBLEServices answers GET /sdk/v1/services/.
func (s *Server) listBLEServices(ctx context.Context, _ *struct{}) (*struct{ Body []BLEServiceBody }, error) {
	out := make([]BLEServiceBody, 0, len(s.sdk.BLEServices))
	for _, b := range s.sdk.BLEServices {
		out = append(out, BLEServiceBody{Name: b.Name, UUID: b.UUID})
	}
	return &struct{ Body []BLEServiceBody }{Body: out}, nil
}

func (s *Server) sdkLogin(ctx context.Context, in *struct {
	ContentType string `header:"Content-Type"`
	RawBody     []byte
}) (*sdkLoginOutput, error) {
	contentType, raw := in.ContentType, in.RawBody
	if mt, _, _ := mime.ParseMediaType(contentType); mt != "application/x-www-form-urlencoded" {
		return nil, s.sdkError(ctx, "login", invalidInput("the body must be application/x-www-form-urlencoded with username and password"))
	}
	form, err := url.ParseQuery(string(raw))
	if err != nil {
		return nil, s.sdkError(ctx, "login", invalidInput("malformed form body"))
	}
	id, secret := form.Get("username"), form.Get("password")
	if id == "" || secret == "" {
		return nil, s.sdkError(ctx, "login", errUnauthenticated("username and password are required"))
	}
	if len(id) > 256 || !utf8.ValidString(id) || strings.ContainsRune(id, 0) {
		// No client has such an id (and Postgres could not even look it up).
		return nil, s.sdkError(ctx, "login", errBadCredentials)
	}
	// The token endpoint's exchange (DESIGN §4.8, §8): wrong passwords are limited per
	// (username, source address), and right ones spend the client's budget per minute, which
	// POST /oauth/token spends too. From a right password on, every answer carries the
	// budget's X-RateLimit-* headers.
	budget := http.Header{}
	client, refused, err := s.checkClientSecret(ctx, id, secret, budget.Set)
	switch {
	case err != nil:
		return nil, s.sdkError(ctx, "login", err)
	case refused != nil && refused.code == "slow_down":
		h := budget.Clone()
		h.Set("Retry-After", refused.rateLimit["Retry-After"])
		return nil, huma.ErrorWithHeaders(huma.NewError(http.StatusTooManyRequests, refused.desc), h)
	case refused != nil:
		return nil, s.sdkError(ctx, "login", errBadCredentials)
	}
	if !slices.Contains(client.Scopes, jwtauth.ScopeTowerAccess) {
		return nil, withBudget(s.sdkError(ctx, "login", errUnauthenticated("this client may not use the mobile SDK (it lacks the tower_access scope)")), budget)
	}
	tok, _, err := s.deps.Auth.Issue(ctx, client.ClientID, client.ClientID, client.OrganizationID, []string{jwtauth.ScopeTowerAccess}, SDKTokenTTL)
	if err != nil {
		return nil, withBudget(s.sdkError(ctx, "login", err), budget)
	}
	return &sdkLoginOutput{Status: http.StatusOK, CacheControl: "no-store",
		RateLimitLimit: budget.Get("X-RateLimit-Limit"), RateLimitRemaining: budget.Get("X-RateLimit-Remaining"),
		RateLimitReset: budget.Get("X-RateLimit-Reset"),
		Body:           SDKLoginBody{AccessToken: tok, TokenType: "bearer"}}, nil
}

// withBudget adds the X-RateLimit-* headers of the client's budget to an error of a login whose
// password was right (none when the budget could not be counted).
func withBudget(err error, budget http.Header) error {
	if len(budget) == 0 {
		return err
	}
	return huma.ErrorWithHeaders(err, budget)
}

func (s *Server) resetTowerEvents(ctx context.Context, in *struct {
	TowerPath
	Body ResetEventsRequest
}) (*struct{ Body SDKTowerBody }, error) {
	p := principal(ctx)
	pathTowerID, reason := in.TowerID, in.Body.Reason
	if err := sdkText("reason", reason); err != nil {
		return nil, s.sdkError(ctx, "reset events", err)
	}
	tower, _, err := s.tower(ctx, p.OrgID, pathTowerID)
	if err != nil {
		return nil, s.sdkError(ctx, "tower", err)
	}
	loc, err := s.deps.Store.TowerLocationOf(ctx, tower.ID)
	if err != nil {
		return nil, s.sdkError(ctx, "tower", err)
	}
	r := store.EventsReset{TowerID: tower.ID, OrganizationID: p.OrgID, ClientID: p.ClientID, Reason: reason}
	if p.Subject != "" && p.Subject != p.ClientID {
		r.UserID = &p.Subject
	}
	if r, err = s.deps.Store.RecordEventsReset(ctx, r); err != nil {
		return nil, s.sdkError(ctx, "reset events", err)
	}
	if r.Repeats == 0 {
		s.sdkMetrics.resets.Inc()
		s.logger.WarnContext(ctx, "tower event log reset", slog.String("tower_id", tower.ID), slog.Int64("reset_id", r.ID),
			slog.String("client_id", p.ClientID), slog.String("reason", reason))
	}
	desc := loc.Name + ", " + loc.City
	if loc.Description != nil && *loc.Description != "" {
		desc = *loc.Description
	}
	return &struct{ Body SDKTowerBody }{Body: SDKTowerBody{ID: tower.ID, Name: tower.Name, Description: desc, SystemID: p.OrgID, TowerModelID: towerModelStandard,
		LocationID: tower.LocationID, PinCode: loc.Zip, AccessModeID: accessModePublic, IsForTest: s.sdk.Environment != "production"}}, nil
}
