// Package lockerrules decides what a tower locker may do next (DESIGN §4.1): given the
// locker's status and an action — a reservation, a token, a release, a use the tower
// reports, an operator's service change — it answers the status the locker moves to and
// what else the move ends or begins, or refuses with a *ConflictError naming the current
// status. It reads and writes nothing: the store reads the locker under its row lock, asks
// Decide, and writes what the decision says. It imports nothing of the service's own, so
// the store and anything above it may use it.
package lockerrules

import (
	"errors"
	"fmt"
	"slices"
)

// Status is one of Harbor's six tower-locker statuses, with the ids clients see.
type Status int16

// The six statuses.
const (
	Available    Status = 1
	Reserved     Status = 2
	Rented       Status = 3
	Occupied     Status = 4
	Declined     Status = 5
	OutOfService Status = 6
)

// Statuses are all six, in id order.
var Statuses = []Status{Available, Reserved, Rented, Occupied, Declined, OutOfService}

var statusNames = map[Status]string{
	Available:    "available",
	Reserved:     "reserved",
	Rented:       "rented",
	Occupied:     "occupied",
	Declined:     "declined",
	OutOfService: "out_of_service",
}

// Name is the status's wire name, e.g. "out_of_service".
func (s Status) Name() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return "unknown"
}

// ErrConflict is what every refusal matches with errors.Is: the locker (or the row the
// action needs) is not in a state that allows it.
var ErrConflict = errors.New("conflict")

// ConflictError says why a locker or reservation could not make a transition; it matches
// ErrConflict with errors.Is.
type ConflictError struct {
	Status Status // the locker's current status, when the conflict is about a locker
	Msg    string
}

func (e *ConflictError) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Action is something asked of a locker.
type Action int

// The actions. The tower's reports are named by what the door saw when it closed.
const (
	// Reserve creates a reservation.
	Reserve Action = iota + 1
	// EndReservation cancels the reservation holding the locker, or expires it.
	EndReservation
	// IssueDropoff, IssuePickup and IssueRelease create a token of that type.
	IssueDropoff
	IssuePickup
	IssueRelease
	// Release gives a rented locker back before using it (POST .../release).
	Release
	// ExpireRental ends a rental or a declined locker's grace whose hold has lapsed (its last
	// drop-off token expired, or the release grace passed).
	ExpireRental
	// UseDropoff: a drop-off token was used and the door closed with an item inside.
	UseDropoff
	// UsePickup: a pickup token was used and the door closed empty.
	UsePickup
	// UsePickupItemLeft: a pickup token was used and the door closed with the item still inside.
	UsePickupItemLeft
	// UseRelease: a release token was used and the door closed empty.
	UseRelease
	// TakeOutOfService is an operator taking the locker out of service; ForceOutOfService
	// does it even with an item inside.
	TakeOutOfService
	ForceOutOfService
	// ReturnToService is an operator returning the locker to service.
	ReturnToService
)

// Actions are all the actions.
var Actions = []Action{Reserve, EndReservation, IssueDropoff, IssuePickup, IssueRelease, Release, ExpireRental,
	UseDropoff, UsePickup, UsePickupItemLeft, UseRelease, TakeOutOfService, ForceOutOfService, ReturnToService}

var actionNames = map[Action]string{
	Reserve: "reserve", EndReservation: "end reservation", IssueDropoff: "issue drop-off token",
	IssuePickup: "issue pickup token", IssueRelease: "issue release token", Release: "release",
	ExpireRental: "expire rental", UseDropoff: "use drop-off token", UsePickup: "use pickup token",
	UsePickupItemLeft: "use pickup token, item left inside", UseRelease: "use release token",
	TakeOutOfService: "take out of service", ForceOutOfService: "force out of service", ReturnToService: "return to service",
}

func (a Action) String() string {
	if n, ok := actionNames[a]; ok {
		return n
	}
	return fmt.Sprintf("action %d", int(a))
}

// Locker is what the rules need to know of a locker.
type Locker struct {
	ID int64 // named in refusals
	// Status is the effective status: a lapsed hold counts as available.
	Status Status
	// Mine: the caller holds the locker's possession (reserved, rented, declined or occupied by it).
	Mine bool
	// KeptPossession: out of service with an item inside, its possession kept.
	KeptPossession bool
}

// Decision is an allowed action's outcome. From == To with nothing else set means the
// action changes nothing (doing it again, or a use that does not move the locker).
type Decision struct {
	From, To Status
	// NewGeneration: a possession ends or a new one begins, so the locker's generation moves
	// on and every earlier token goes stale.
	NewGeneration bool
	// EndsReservation: the reservation holding the locker is consumed or cancelled.
	EndsReservation bool
	// EndsPossession: nobody possesses the locker afterwards; its active tokens are void.
	EndsPossession bool
	// KeepsPossession: the locker goes out of service with its item and possessor kept.
	KeepsPossession bool
}

// Unchanged reports whether the decision leaves the locker as it was.
func (d Decision) Unchanged() bool {
	return d == Decision{From: d.From, To: d.From}
}

// Decide answers whether the locker may take the action, and how it changes; a refusal is a
// *ConflictError naming the current status.
func Decide(k Locker, a Action) (Decision, error) {
	s := k.Status
	stay := Decision{From: s, To: s}
	move := func(to Status) Decision { return Decision{From: s, To: to} }
	refuse := func(format string, args ...any) (Decision, error) {
		return Decision{}, &ConflictError{Status: s, Msg: fmt.Sprintf(format, args...)}
	}
	switch a {
	case Reserve:
		if s != Available {
			return refuse("locker %d is %s, not available", k.ID, s.Name())
		}
		d := move(Reserved)
		d.NewGeneration = true
		return d, nil
	case EndReservation:
		if s != Reserved {
			return refuse("locker %d is %s, not reserved", k.ID, s.Name())
		}
		d := move(Available)
		d.EndsReservation, d.EndsPossession = true, true
		return d, nil
	case IssueDropoff:
		switch s {
		case Available:
			d := move(Rented)
			d.NewGeneration = true
			return d, nil
		case Reserved:
			if !k.Mine {
				return refuse("locker %d is reserved by another client", k.ID)
			}
			d := move(Rented)
			d.EndsReservation = true
			return d, nil
		case Rented, Declined:
			if !k.Mine {
				return refuse("locker %d is %s by another client", k.ID, s.Name())
			}
			return move(Rented), nil
		case Occupied:
			if !k.Mine {
				return refuse("locker %d is occupied by another client's item", k.ID)
			}
			return stay, nil
		}
		return refuse("locker %d is %s", k.ID, s.Name())
	case IssuePickup:
		if s != Occupied {
			return refuse("a pickup token needs an occupied locker; locker %d is %s", k.ID, s.Name())
		}
		if !k.Mine {
			return refuse("locker %d is occupied by another client's item", k.ID)
		}
		return stay, nil
	case IssueRelease:
		if s != Declined {
			return refuse("a release token needs a declined locker; locker %d is %s", k.ID, s.Name())
		}
		if !k.Mine {
			return refuse("locker %d is declined by another client", k.ID)
		}
		return stay, nil
	case Release:
		if s != Rented {
			return refuse("only a rented locker can be released; locker %d is %s", k.ID, s.Name())
		}
		if !k.Mine {
			return refuse("locker %d is rented by another client", k.ID)
		}
		return move(Declined), nil
	case ExpireRental:
		if s != Rented && s != Declined {
			return refuse("locker %d is %s, not rented or declined", k.ID, s.Name())
		}
		d := move(Available)
		d.EndsPossession = true
		return d, nil
	case UseDropoff:
		switch s {
		case Occupied:
			return stay, nil // an item added
		case Rented, Declined, Available:
			// Available: freed by its expiry but given to nobody since; the item is inside.
			return move(Occupied), nil
		}
		return refuse("drop-off with the item inside on locker %d, which is %s", k.ID, s.Name())
	case UsePickup, UsePickupItemLeft:
		if s != Occupied {
			return refuse("pickup on locker %d, which is %s", k.ID, s.Name())
		}
		if a == UsePickupItemLeft {
			return stay, nil
		}
		d := move(Available)
		d.NewGeneration, d.EndsPossession = true, true
		return d, nil
	case UseRelease:
		// The tower ends the possession whenever a release token closes the door empty; a
		// locker rented again during the grace follows it too, or the tower would refuse
		// every token of that rental as stale. Elsewhere the use changes nothing.
		if s != Declined && s != Rented {
			return stay, nil
		}
		d := move(Available)
		d.NewGeneration, d.EndsPossession = true, true
		return d, nil
	case TakeOutOfService, ForceOutOfService:
		switch s {
		case OutOfService:
			return stay, nil
		case Occupied:
			if a != ForceOutOfService {
				return refuse("locker %d is occupied: an item is inside; force keeps its possession", k.ID)
			}
			d := move(OutOfService)
			d.NewGeneration, d.KeepsPossession = true, true
			return d, nil
		}
		d := move(OutOfService)
		d.NewGeneration = true
		d.EndsReservation = s == Reserved
		d.EndsPossession = s != Available
		return d, nil
	case ReturnToService:
		if s != OutOfService {
			return stay, nil
		}
		if k.KeptPossession {
			return move(Occupied), nil
		}
		return move(Available), nil
	}
	return Decision{}, fmt.Errorf("decide: unknown %s", a)
}

// From lists the statuses the action moves a locker out of (for its possessor): the guard
// of a write that makes the move without reading the row first.
func From(a Action) []Status {
	var out []Status
	for _, s := range Statuses {
		if d, err := Decide(Locker{Status: s, Mine: true}, a); err == nil && d.To != s {
			out = append(out, s)
		}
	}
	return out
}

// Lapsing lists the statuses whose hold ends by time: a reservation's, a rental's, a
// declined locker's grace. Once its hold_expires_at passed, such a locker counts as
// available.
func Lapsing() []Status {
	out := append(From(EndReservation), From(ExpireRental)...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Possessed lists the statuses in which a client holds the locker: only it may take tokens
// for it, everyone else is refused.
func Possessed() []Status {
	var out []Status
	for _, s := range Statuses {
		_, mine := Decide(Locker{Status: s, Mine: true}, IssueDropoff)
		_, others := Decide(Locker{Status: s}, IssueDropoff)
		if mine == nil && others != nil {
			out = append(out, s)
		}
	}
	return out
}
