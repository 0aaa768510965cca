package lockerrules_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/lockerrules"
)

// The statuses by their DESIGN §4.1 names.
const (
	available    = lockerrules.Available
	reserved     = lockerrules.Reserved
	rented       = lockerrules.Rented
	occupied     = lockerrules.Occupied
	declined     = lockerrules.Declined
	outOfService = lockerrules.OutOfService
)

// edge is one row of DESIGN §4.1's transition table, for the possessing caller (or, for
// available lockers, anyone).
type edge struct {
	from lockerrules.Status
	a    lockerrules.Action
	to   lockerrules.Status
}

// designTransitions are the moves DESIGN §4.1 lists, plus the token issues §4.5 allows
// without a move (a pickup token of an occupied locker, a release token of a declined one)
// and the repeated operator actions that change nothing. Every other status × action is
// refused, or — for a use the tower reports or a repeated operator action — changes nothing.
var designTransitions = []edge{
	{available, lockerrules.Reserve, reserved},
	{reserved, lockerrules.EndReservation, available},
	{available, lockerrules.IssueDropoff, rented},
	{reserved, lockerrules.IssueDropoff, rented},
	{rented, lockerrules.IssueDropoff, rented},
	{rented, lockerrules.UseDropoff, occupied},
	{rented, lockerrules.ExpireRental, available},
	{rented, lockerrules.Release, declined},
	{declined, lockerrules.IssueDropoff, rented},
	{declined, lockerrules.UseRelease, available},
	{declined, lockerrules.ExpireRental, available},
	{declined, lockerrules.IssueRelease, declined},
	{occupied, lockerrules.IssueDropoff, occupied},
	{occupied, lockerrules.IssuePickup, occupied},
	{occupied, lockerrules.UsePickup, available},
	{available, lockerrules.TakeOutOfService, outOfService},
	{reserved, lockerrules.TakeOutOfService, outOfService},
	{rented, lockerrules.TakeOutOfService, outOfService},
	{declined, lockerrules.TakeOutOfService, outOfService},
	{available, lockerrules.ForceOutOfService, outOfService},
	{reserved, lockerrules.ForceOutOfService, outOfService},
	{rented, lockerrules.ForceOutOfService, outOfService},
	{declined, lockerrules.ForceOutOfService, outOfService},
	{occupied, lockerrules.ForceOutOfService, outOfService},
	{outOfService, lockerrules.ReturnToService, available},
	// Moves the tower's reports make that the table's rows imply: a drop-off on a
	// declined locker, or on one whose rental lapsed with the item already inside; more
	// items into an occupied locker; a pickup that left the item inside; a release token
	// used on a locker rented again during its grace.
	{declined, lockerrules.UseDropoff, occupied},
	{available, lockerrules.UseDropoff, occupied},
	{occupied, lockerrules.UseDropoff, occupied},
	{occupied, lockerrules.UsePickupItemLeft, occupied},
	{rented, lockerrules.UseRelease, available},
}

// noChange are the actions that answer "nothing to do" rather than a conflict where they do
// not apply: the tower's reports of a door it already closed, and an operator repeating a
// service change.
var noChange = map[lockerrules.Action]bool{
	lockerrules.UseRelease: true, lockerrules.ReturnToService: true,
}

func allowedMove(from lockerrules.Status, a lockerrules.Action) (lockerrules.Status, bool) {
	for _, e := range designTransitions {
		if e.from == from && e.a == a {
			return e.to, true
		}
	}
	return 0, false
}

// TestEveryStatusTimesEveryAction drives Decide for the possessing caller through every
// status and action: the moves DESIGN §4.1 lists happen, and every other combination is
// either a conflict naming the current status or, where DESIGN says so, changes nothing.
func TestEveryStatusTimesEveryAction(t *testing.T) {
	t.Parallel()
	for _, s := range lockerrules.Statuses {
		for _, a := range lockerrules.Actions {
			t.Run(fmt.Sprintf("%s/%s", s.Name(), a), func(t *testing.T) {
				t.Parallel()
				d, err := lockerrules.Decide(lockerrules.Locker{ID: 7, Status: s, Mine: true}, a)
				if to, ok := allowedMove(s, a); ok {
					require.NoError(t, err)
					assert.Equal(t, s, d.From)
					assert.Equal(t, to, d.To)
					return
				}
				if noChange[a] || (s == outOfService && (a == lockerrules.TakeOutOfService || a == lockerrules.ForceOutOfService)) {
					require.NoError(t, err)
					assert.True(t, d.Unchanged(), "%s on a %s locker changes nothing", a, s.Name())
					return
				}
				require.Error(t, err, "%s on a %s locker", a, s.Name())
				var ce *lockerrules.ConflictError
				require.ErrorAs(t, err, &ce)
				assert.ErrorIs(t, err, lockerrules.ErrConflict)
				assert.Equal(t, s, ce.Status, "the refusal names the current status")
				assert.Contains(t, ce.Msg, "locker 7")
			})
		}
	}
}

// TestOnlyThePossessorTakesTokens: a rented, occupied or declined locker, or one reserved,
// gives tokens only to its possessor; an available locker to anyone; others get a conflict.
func TestOnlyThePossessorTakesTokens(t *testing.T) {
	t.Parallel()
	issues := []lockerrules.Action{lockerrules.IssueDropoff, lockerrules.IssuePickup, lockerrules.IssueRelease, lockerrules.Release}
	for _, s := range []lockerrules.Status{reserved, rented, occupied, declined} {
		for _, a := range issues {
			_, mine := lockerrules.Decide(lockerrules.Locker{ID: 1, Status: s, Mine: true}, a)
			_, other := lockerrules.Decide(lockerrules.Locker{ID: 1, Status: s}, a)
			if mine == nil {
				assert.ErrorIs(t, other, lockerrules.ErrConflict, "%s on a %s locker by another client", a, s.Name())
				assert.Contains(t, other.Error(), "another client", "%s on a %s locker", a, s.Name())
			} else {
				assert.Error(t, other, "%s on a %s locker", a, s.Name())
			}
		}
	}
	d, err := lockerrules.Decide(lockerrules.Locker{ID: 1, Status: available}, lockerrules.IssueDropoff)
	require.NoError(t, err, "an available locker takes anyone's drop-off token")
	assert.Equal(t, rented, d.To)
	assert.ElementsMatch(t, []lockerrules.Status{reserved, rented, occupied, declined}, lockerrules.Possessed())
}

// TestGenerationMovesWithPossession: a new possession (a reservation, a drop-off token of an
// available locker) and the end of one at the tower or by an operator move the generation;
// a token within the same possession does not.
func TestGenerationMovesWithPossession(t *testing.T) {
	t.Parallel()
	cases := []struct {
		from lockerrules.Status
		a    lockerrules.Action
		want bool
	}{
		{available, lockerrules.Reserve, true},
		{available, lockerrules.IssueDropoff, true},
		{reserved, lockerrules.IssueDropoff, false},
		{rented, lockerrules.IssueDropoff, false},
		{declined, lockerrules.IssueDropoff, false},
		{occupied, lockerrules.IssueDropoff, false},
		{occupied, lockerrules.UsePickup, true},
		{declined, lockerrules.UseRelease, true},
		{rented, lockerrules.TakeOutOfService, true},
		{occupied, lockerrules.ForceOutOfService, true},
		// The next possession moves it: a late drop-off of the lapsed one still applies (§4.7).
		{rented, lockerrules.ExpireRental, false},
	}
	for _, c := range cases {
		d, err := lockerrules.Decide(lockerrules.Locker{Status: c.from, Mine: true}, c.a)
		require.NoError(t, err, "%s on a %s locker", c.a, c.from.Name())
		assert.Equal(t, c.want, d.NewGeneration, "%s on a %s locker", c.a, c.from.Name())
	}
}

// TestOutOfServiceKeepsOnlyAnItemInside: taking a locker out of service ends its possession
// and any reservation, except an occupied one forced out, which keeps its possession and
// returns to service occupied.
func TestOutOfServiceKeepsOnlyAnItemInside(t *testing.T) {
	t.Parallel()
	for _, s := range []lockerrules.Status{available, reserved, rented, declined, occupied} {
		d, err := lockerrules.Decide(lockerrules.Locker{Status: s}, lockerrules.ForceOutOfService)
		require.NoError(t, err)
		assert.Equal(t, s == occupied, d.KeepsPossession, s.Name())
		assert.Equal(t, s != occupied && s != available, d.EndsPossession, s.Name())
		assert.Equal(t, s == reserved, d.EndsReservation, s.Name())

		back, err := lockerrules.Decide(lockerrules.Locker{Status: outOfService, KeptPossession: d.KeepsPossession}, lockerrules.ReturnToService)
		require.NoError(t, err)
		want := available
		if s == occupied {
			want = occupied
		}
		assert.Equal(t, want, back.To, "a %s locker returns to service", s.Name())
	}
	_, err := lockerrules.Decide(lockerrules.Locker{ID: 3, Status: occupied}, lockerrules.TakeOutOfService)
	var ce *lockerrules.ConflictError
	require.True(t, errors.As(err, &ce), "an occupied locker needs force")
	assert.Equal(t, occupied, ce.Status)
}

// TestHoldsThatLapse: the holds that end by time are a reservation's, a rental's and a
// declined locker's grace; the guards of the writes that end them take exactly those.
func TestHoldsThatLapse(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []lockerrules.Status{reserved}, lockerrules.From(lockerrules.EndReservation))
	assert.Equal(t, []lockerrules.Status{rented, declined}, lockerrules.From(lockerrules.ExpireRental))
	assert.Equal(t, []lockerrules.Status{reserved, rented, declined}, lockerrules.Lapsing())
	assert.Equal(t, []lockerrules.Status{available}, lockerrules.From(lockerrules.Reserve))
}

func TestUnknownAction(t *testing.T) {
	t.Parallel()
	_, err := lockerrules.Decide(lockerrules.Locker{Status: available}, lockerrules.Action(99))
	require.Error(t, err)
	assert.NotErrorIs(t, err, lockerrules.ErrConflict)
}
