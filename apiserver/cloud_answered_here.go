package apiserver

import (
	"context"
	"net/http"
	"reflect"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/internal/store"
)

// The gateway cloud API's operations answered by the apiserver itself, not by a gateway (DESIGN §6.1):
// the version probe, the key's identity and the accessible locations.

// ApiMeta is the version probe's answer.
type ApiMeta struct {
	Name        string           `json:"name"`
	Version     string           `json:"version" enum:"v1"`
	ServerTime  Timestamp        `json:"serverTime"`
	Deprecation *DeprecationBody `json:"deprecation" doc:"null unless v1 is deprecated"`
	Environment string           `json:"environment" doc:"The deployment answering (LOCKERNET_ENVIRONMENT), e.g. sandbox or production" example:"sandbox"`
}

// DeprecationBody announces the deprecation of v1.
type DeprecationBody struct {
	DeprecatedAt Timestamp  `json:"deprecatedAt"`
	SunsetAt     *Timestamp `json:"sunsetAt" nullable:"true"`
	Link         *string    `json:"link" doc:"Migration guide"`
}

// deprecationFields are DeprecationBody's fields without its Schema method.
type deprecationFields DeprecationBody

// Schema documents the deprecation as an object or null: the probe sends null until v1 is
// deprecated (huma's nullable tag takes no object).
func (DeprecationBody) Schema(r huma.Registry) *huma.Schema {
	s := huma.SchemaFromType(r, reflect.TypeOf(deprecationFields{}))
	s.Nullable = true
	return s
}

// MeResponse identifies the caller's key.
type MeResponse struct {
	KeyID        string          `json:"keyId" format:"uuid"`
	KeyPrefix    string          `json:"keyPrefix" example:"lnk_1a2b3c4d"`
	Organization OrganizationRef `json:"organization"`
	RateLimit    RateLimitBody   `json:"rateLimit"`
}

// OrganizationRef names an organization.
type OrganizationRef struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// RateLimitBody is a key's rate limit.
type RateLimitBody struct {
	Limit         int `json:"limit" example:"120"`
	WindowSeconds int `json:"windowSeconds" example:"60"`
}

// LocationSummary is a gateway location of the caller's organization.
type LocationSummary struct {
	ID            int64      `json:"id"`
	Name          string     `json:"name"`
	Timezone      *string    `json:"timezone"`
	GatewayID     string     `json:"gatewayId" doc:"Serial of the location's gateway" example:"GW-0001"`
	GatewayOnline bool       `json:"gatewayOnline"`
	LastSeenAt    *Timestamp `json:"lastSeenAt" nullable:"true" doc:"When the gateway last answered the cloud"`
}

// LocationList is the list of accessible locations.
type LocationList struct {
	Data []LocationSummary `json:"data"`
}

func (s *Server) registerCloud(api huma.API) {
	api.OpenAPI().Components.SecuritySchemes[schemeGatewayKey] = &huma.SecurityScheme{Type: "apiKey", In: "header", Name: "X-API-Key",
		Description: "Gateway cloud API key: lnk_ followed by 64 lower-case hex digits."}
	api.OpenAPI().Components.SecuritySchemes[schemeGatewayBearer] = &huma.SecurityScheme{Type: "http", Scheme: "bearer",
		Description: "The gateway cloud API key as a bearer token (Authorization: Bearer lnk_...)."}
	grp := huma.NewGroup(api, cloudPrefix)
	grp.UseMiddleware(s.authenticateKey(api))
	tags := []string{"Gateway cloud API"}

	huma.Register(grp, op(huma.Operation{
		OperationID: "customer-get-meta", Method: http.MethodGet, Path: "/", Tags: tags,
		Summary: "API version probe", Description: "Needs no key.",
	}), s.getCloudMeta)

	huma.Register(grp, op(huma.Operation{
		OperationID: "customer-get-me", Method: http.MethodGet, Path: "/me", Tags: tags,
		Summary: "Identify the key", Security: cloudSecurity,
	}), s.getCloudMe)

	huma.Register(grp, op(huma.Operation{
		OperationID: "customer-list-locations", Method: http.MethodGet, Path: "/locations", Tags: tags,
		Summary:     "Accessible locations",
		Description: "The key's organization's locations that have a gateway, with the gateway's health: online when it answered the cloud within the last two minutes (health checks every 30 s and every request outcome).",
		Security:    cloudSecurity,
	}), s.listCloudLocations)

	s.registerGatewayRequests(grp, tags)
}

// getCloudMeta answers GET / (the API version probe).
func (s *Server) getCloudMeta(ctx context.Context, _ *struct{}) (*struct{ Body ApiMeta }, error) {
	return &struct{ Body ApiMeta }{Body: s.cloud.meta()}, nil
}

// getCloudMe answers GET /me.
func (s *Server) getCloudMe(ctx context.Context, _ *struct{}) (*struct{ Body MeResponse }, error) {
	k := cloudKey(ctx)
	return &struct{ Body MeResponse }{Body: MeResponse{
		KeyID: k.KeyID.String(), KeyPrefix: k.KeyPrefix,
		Organization: OrganizationRef{ID: k.OrganizationID, Name: k.OrganizationName},
		RateLimit:    RateLimitBody{Limit: k.Limit, WindowSeconds: int(store.RateWindow.Seconds())},
	}}, nil
}

// listCloudLocations answers GET /locations.
func (s *Server) listCloudLocations(ctx context.Context, _ *struct{}) (*struct{ Body LocationList }, error) {
	k := cloudKey(ctx)
	ls, err := s.deps.Store.GatewayLocations(ctx, k.OrganizationID, s.cloud.settings.OnlineWithin)
	if err != nil {
		return nil, s.cloudFailure(ctx, "list gateway locations", err)
	}
	out := LocationList{Data: make([]LocationSummary, 0, len(ls))}
	for _, l := range ls {
		sum := LocationSummary{ID: l.ID, Name: l.Name, Timezone: l.Timezone, GatewayID: l.GatewaySerial, GatewayOnline: l.Online}
		sum.LastSeenAt = optTS(l.LastSeenAt)
		out.Data = append(out.Data, sum)
	}
	return &struct{ Body LocationList }{Body: out}, nil
}

func (c *cloud) meta() ApiMeta {
	m := ApiMeta{Name: "Locker Network Service gateway cloud API", Version: "v1", ServerTime: ts(time.Now()),
		Environment: c.settings.Environment}
	if d := c.settings.Deprecation; d != nil {
		m.Deprecation = &DeprecationBody{DeprecatedAt: ts(d.At)}
		if !d.Sunset.IsZero() {
			t := ts(d.Sunset)
			m.Deprecation.SunsetAt = &t
		}
		if d.Link != "" {
			link := d.Link
			m.Deprecation.Link = &link
		}
	}
	return m
}
