package apiserver

import (
	"context"
	"errors"

	"github.com/danielgtaylor/huma/v2"
)

// errBadCredentials: an SDK login whose username names no client, or whose password is
// wrong. Both answer alike, so a caller cannot tell which client ids exist.
var errBadCredentials = errors.New("unknown username or wrong password")

// sdkError is the mobile SDK API's error mapper (DESIGN §4.8, /sdk/v1): RFC 9457
// problem+json, as Harbor's SDKs read it; a refused login is 401, as those SDKs expect.
func (s *Server) sdkError(ctx context.Context, op string, err error) error {
	if errors.Is(err, errBadCredentials) {
		return huma.Error401Unauthorized(errBadCredentials.Error())
	}
	return s.problem(ctx, op, err)
}
