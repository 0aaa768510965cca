package apiserver

import (
	"context"
	"errors"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/store"
)

// Security scheme names used in Operation.Security.
const schemeBearer = "bearer"

// needs returns the Security requirement of an operation that wants a bearer token
// carrying scope ("" for any valid token).
func needs(scope string) []map[string][]string {
	if scope == "" {
		return []map[string][]string{{schemeBearer: {}}}
	}
	return []map[string][]string{{schemeBearer: {scope}}}
}

type principalKey struct{}

// principal returns the verified caller of a bearer-authenticated operation.
func principal(ctx context.Context) jwtauth.Principal {
	p, _ := ctx.Value(principalKey{}).(jwtauth.Principal)
	return p
}

// authenticate enforces each operation's declared Security: the bearer JWT must verify and
// carry every scope the operation lists. Operations without Security are public.
func (s *Server) authenticate(api huma.API) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		var scopes []string
		bearer := false
		for _, req := range ctx.Operation().Security {
			if sc, ok := req[schemeBearer]; ok {
				bearer = true
				scopes = append(scopes, sc...)
			}
			if _, ok := req[schemeAppKey]; ok {
				s.authenticateAppKey(api, ctx, next)
				return
			}
		}
		if !bearer {
			next(ctx)
			return
		}
		refuse := func(err error) { s.refuseBearer(api, ctx, err) }
		if conflictingCredentials(ctx) {
			ctx.SetHeader("WWW-Authenticate", `Bearer realm="lockernet", error="invalid_request"`)
			refuse(errUnauthenticated("conflicting credentials: present one bearer token only"))
			return
		}
		token, ok := bearerToken(ctx.Header("Authorization"))
		if !ok {
			ctx.SetHeader("WWW-Authenticate", `Bearer realm="lockernet"`)
			refuse(errUnauthenticated("missing bearer token"))
			return
		}
		p, err := s.deps.Auth.Verify(ctx.Context(), token)
		if err != nil {
			desc := "invalid token"
			if errors.Is(err, jwtauth.ErrExpiredToken) {
				desc = "token expired"
			}
			ctx.SetHeader("WWW-Authenticate", `Bearer realm="lockernet", error="invalid_token", error_description="`+desc+`"`)
			refuse(errUnauthenticated(desc))
			return
		}
		enabled, err := s.clientEnabled(ctx.Context(), p.ClientID)
		if err != nil {
			s.logger.ErrorContext(ctx.Context(), "client lookup", "err", err)
			refuse(errAuthUnavailable)
			return
		}
		if !enabled {
			ctx.SetHeader("WWW-Authenticate", `Bearer realm="lockernet", error="invalid_token", error_description="client disabled"`)
			refuse(errUnauthenticated("the token's client is disabled"))
			return
		}
		// Every bearer operation — the tower API (/api/v1) and the mobile SDK API (/sdk/v1) —
		// counts against one limit per service-provider client (DESIGN §4.8, §8): the phones
		// of an app spend its backend's budget, so a client past its limit is refused on both
		// surfaces alike. The client is known from here on, so every answer, a refused scope
		// included, carries the X-RateLimit-* headers; a refused request reaches no handler.
		if wait := s.countRequest(ctx.Context(), ctx.SetHeader, store.RateTowerClient, p.ClientID, s.rates.Tower); wait > 0 {
			refuse(rateLimited(wait))
			return
		}
		for _, sc := range scopes {
			if !p.HasScope(sc) {
				ctx.SetHeader("WWW-Authenticate", `Bearer realm="lockernet", error="insufficient_scope", scope="`+sc+`"`)
				refuse(errForbidden("the token lacks the scope " + sc))
				return
			}
		}
		next(huma.WithValue(ctx, principalKey{}, p))
	}
}

// refuseBearer writes a refusal of the bearer middleware through the error mapper of the
// surface the path belongs to: the mobile SDK API's (/sdk/v1) or the tower API's (/api/v1,
// its login included).
func (s *Server) refuseBearer(api huma.API, ctx huma.Context, err error) {
	mapper := s.towerError
	if strings.HasPrefix(ctx.URL().Path, "/sdk/") {
		mapper = s.sdkError
	}
	writeRefusal(api, ctx, mapper(ctx.Context(), "authenticate", err))
}

func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// conflictingCredentials reports whether a request presents more than one credential that
// disagree: an X-API-Key and a bearer token that differ, two different X-API-Key headers, two
// different Authorization headers. Such a request is refused (401) on every surface rather
// than answered as whichever header happens to be read first.
func conflictingCredentials(ctx huma.Context) bool {
	var first string
	conflict := false
	ctx.EachHeader(func(name, value string) {
		var v string
		switch {
		case strings.EqualFold(name, "X-API-Key"):
			v = strings.TrimSpace(value)
		case strings.EqualFold(name, "Authorization"):
			if tok, ok := bearerToken(value); ok {
				v = tok
			} else {
				v = strings.TrimSpace(value)
			}
		default:
			return
		}
		if v == "" {
			return
		}
		if first == "" {
			first = v
		} else if v != first {
			conflict = true
		}
	})
	return conflict
}
