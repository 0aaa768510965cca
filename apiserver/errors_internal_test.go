package apiserver

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/stretchr/testify/require"
)

// mapperCase is one row of a surface's error table: the error a handler returns and what
// the caller sees.
type mapperCase struct {
	name   string
	err    error
	status int
	body   string            // the JSON body, exactly (problem+json and OAuth bodies)
	header map[string]string // headers the answer must carry
}

func quietServer() *Server {
	return &Server{logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// answer is what a mapped error puts on the wire: status, JSON body and headers.
func answer(t *testing.T, err error) (int, string, http.Header) {
	t.Helper()
	var se huma.StatusError
	require.True(t, errors.As(err, &se), "not a status error: %v", err)
	b, jerr := json.Marshal(se)
	require.NoError(t, jerr)
	h := http.Header{}
	var he huma.HeadersError
	if errors.As(err, &he) {
		h = he.GetHeaders()
	}
	return se.GetStatus(), string(b), h
}

func runMapperCases(t *testing.T, mapper func(error) error, cases []mapperCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, body, h := answer(t, mapper(tc.err))
			require.Equal(t, tc.status, status)
			require.JSONEq(t, tc.body, body)
			for k, v := range tc.header {
				require.Equal(t, v, h.Get(k), k)
			}
		})
	}
}
