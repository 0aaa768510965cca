package store

import (
	"strconv"
	"strings"

	"github.com/lockernet/lockernet/internal/lockerrules"
)

// sqlStatuses writes locker statuses as a SQL list of their ids ("2, 3, 5"): statements
// name statuses by their Go constants (model.go) or by the rules' sets (lockerrules), and
// the text Postgres gets, and so its plan, is the same as with the numbers written in.
func sqlStatuses(ss ...LockerStatus) string {
	ids := make([]string, len(ss))
	for i, s := range ss {
		ids[i] = strconv.Itoa(int(s))
	}
	return strings.Join(ids, ", ")
}

// The statuses and status lists the statements name.
var (
	availableSQL    = sqlStatuses(StatusAvailable)
	reservedSQL     = sqlStatuses(StatusReserved)
	outOfServiceSQL = sqlStatuses(StatusOutOfService)
	// lapsingSQL: the statuses whose hold ends by time (hold_expires_at).
	lapsingSQL = sqlStatuses(lockerrules.Lapsing()...)
	// rentalSQL: the statuses a rental's lapsed hold ends (its last drop-off token expired).
	rentalSQL = sqlStatuses(lockerrules.From(lockerrules.ExpireRental)...)
	// reservableSQL: the statuses a reservation claims.
	reservableSQL = sqlStatuses(lockerrules.From(lockerrules.Reserve)...)
	// endsReservationSQL: the status whose reservation, ending, frees the locker.
	endsReservationSQL = sqlStatuses(lockerrules.From(lockerrules.EndReservation)...)
	// possessedSQL: the statuses in which a client holds the locker.
	possessedSQL = sqlStatuses(lockerrules.Possessed()...)
)
