package apiserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/store"
)

// Overload is answered 503 with Retry-After by the mappers of every surface, never 500.
func TestOverloadIsA503(t *testing.T) {
	s := &Server{logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	err := fmt.Errorf("create reservation: %w", store.ErrOverloaded)
	for name, got := range map[string]error{
		"tower API":         s.towerError(context.Background(), "reservation", err),
		"app engine API":    s.appError(context.Background(), "access code", err),
		"mobile SDK API":    s.sdkError(context.Background(), "tower", err),
		"gateway cloud API": s.cloudFailure(context.Background(), "create gateway request", err),
	} {
		var se huma.StatusError
		require.ErrorAs(t, got, &se, name)
		assert.Equal(t, http.StatusServiceUnavailable, se.GetStatus(), name)
		var he huma.HeadersError
		require.ErrorAs(t, got, &he, name)
		assert.Equal(t, "1", he.GetHeaders().Get("Retry-After"), name)
	}
}
