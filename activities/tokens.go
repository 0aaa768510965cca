package activities

import (
	"context"

	"github.com/google/uuid"
)

// TokenStore is what the locker-token activities need from Postgres.
type TokenStore interface {
	ExpireToken(ctx context.Context, id uuid.UUID) (bool, error)
}

// ExpireTokenInput names the token whose timer fired.
type ExpireTokenInput struct {
	TokenID string
}

// ExpireTokenResult tells whether the expiry changed anything.
type ExpireTokenResult struct {
	// Expired is false when the token had already been used or revoked.
	Expired bool
}

// ExpireToken marks the token expired and ends the rental whose last drop-off token it was.
func (a *Activities) ExpireToken(ctx context.Context, in ExpireTokenInput) (ExpireTokenResult, error) {
	expired, err := applyExpiry(ctx, "token", in.TokenID, a.Tokens.ExpireToken)
	return ExpireTokenResult{Expired: expired}, err
}
