package towersim

import "errors"

// Refusal is why a tower would not open for a token. A refused token changes nothing at the
// tower and records no event.
type Refusal struct {
	Code        string // machine code, as answered by the control API
	Description string // one sentence for people
}

func (r *Refusal) Error() string { return "token refused: " + r.Code }

// The refusals of DESIGN §4.5. A tower checks a token in this order: its MAC and tower, the
// session's permission for its type, the locker, its service state, the generation, the
// expiry, one use.
var (
	ErrInvalidToken    = &Refusal{"invalid_token", "the token is not well-formed or its MAC does not verify with this tower's key"}
	ErrWrongTower      = &Refusal{"wrong_tower", "the token was issued for another tower"}
	ErrUnknownLocker   = &Refusal{"unknown_locker", "this tower has no locker with the token's locker id"}
	ErrStaleGeneration = &Refusal{"stale_generation", "the token belongs to an earlier possession of the locker: its generation is older than the tower's"}
	ErrExpired         = &Refusal{"expired", "the token has expired by the tower's clock"}
	ErrAlreadyUsed     = &Refusal{"already_used", "the token has already opened the door once"}
)

// Refusals of the session and the cloud's commands (DESIGN §4.8).
var (
	ErrNoSession      = &Refusal{"no_session", "the phone has no session with the tower: it could not get one from the cloud and has none cached"}
	ErrInvalidSession = &Refusal{"invalid_session", "the tower refused the session: not sealed for it by the cloud, or expired by its clock"}
	ErrNotPermitted   = &Refusal{"not_permitted", "the session's claim does not allow this (e.g. a sync_packet session cannot open, a delivery session cannot pick up)"}
	ErrOutOfService   = &Refusal{"out_of_service", "the cloud has told the tower that the locker is out of service"}
)

var refusals = []*Refusal{ErrInvalidToken, ErrWrongTower, ErrUnknownLocker, ErrStaleGeneration, ErrExpired, ErrAlreadyUsed,
	ErrNoSession, ErrInvalidSession, ErrNotPermitted, ErrOutOfService}

// RefusalCode returns the refusal code err carries, or "" when err is not a refusal.
func RefusalCode(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}

// DescribeRefusal returns the sentence for a refusal code, or "" for an unknown code.
func DescribeRefusal(code string) string {
	for _, r := range refusals {
		if r.Code == code {
			return r.Description
		}
	}
	return ""
}
