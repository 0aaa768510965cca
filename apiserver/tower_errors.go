package apiserver

import "context"

// towerError is the tower API's error mapper (DESIGN §4; also /api/v1/login and the tower
// event upload the mobile SDK shares): RFC 9457 problem+json whose string detail Harbor's
// SDKs read. The tower API's refusals are all shared domain errors, so it maps them as
// every problem+json surface does.
func (s *Server) towerError(ctx context.Context, op string, err error) error {
	return s.problem(ctx, op, err)
}
