package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Transaction is a row of an organization's transaction list.
type Transaction struct {
	ID              uuid.UUID
	Type            string
	Status          string
	OrderReference  *string
	PickupCodeLast2 *string
	LockerNumber    *string
	TowerName       *string
	Location        *string
	City            *string
	PinCode         *string
	CreatedAt       time.Time
	CompletedAt     *time.Time
}

// TransactionFilter holds the list's filters; empty fields filter nothing.
type TransactionFilter struct {
	OrgID          int64
	SubOrgID       *int64
	Type           string
	OrderReference string
	PickupCodeHash []byte
	LockerNumber   string
	TowerName      string
	Location       string
	City           string
	PinCode        string
}

// ListTransactions returns one page of the organization's transactions, newest first with
// the id as tie-break, and the total count. Text filters other than the order reference
// and pin code ignore case.
func (s *Store) ListTransactions(ctx context.Context, f TransactionFilter, pageSize, page int) ([]Transaction, int, error) {
	where := []string{"organization_id = $1"}
	args := []any{f.OrgID}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.SubOrgID != nil {
		add("sub_organization_id = $%d", *f.SubOrgID)
	}
	if f.Type != "" {
		add("type = $%d", f.Type)
	}
	if f.OrderReference != "" {
		add("order_reference = $%d", f.OrderReference)
	}
	if f.PickupCodeHash != nil {
		add("pickup_code_hash = $%d", f.PickupCodeHash)
	}
	if f.LockerNumber != "" {
		add("lower(locker_number) = lower($%d)", f.LockerNumber)
	}
	if f.TowerName != "" {
		add("lower(tower_name) = lower($%d)", f.TowerName)
	}
	if f.Location != "" {
		add("lower(location_name) = lower($%d)", f.Location)
	}
	if f.City != "" {
		add("lower(city) = lower($%d)", f.City)
	}
	if f.PinCode != "" {
		add("pin_code = $%d", f.PinCode)
	}
	cond := strings.Join(where, " AND ")
	var total int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM transactions WHERE `+cond, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count transactions: %w", translate(err))
	}
	args = append(args, pageSize, (page-1)*pageSize)
	rows, err := s.db.Query(ctx, fmt.Sprintf(`
		SELECT id, type, status, order_reference, pickup_code_last2, locker_number, tower_name, location_name, city,
		       pin_code, created_at, completed_at
		FROM transactions WHERE %s
		ORDER BY created_at DESC, id DESC
		LIMIT $%d OFFSET $%d`, cond, len(args)-1, len(args)), args...)
	list, err := scanAll(rows, err, "list transactions", "transaction", []Transaction{}, func(row pgx.Row) (Transaction, error) {
		var t Transaction
		err := row.Scan(&t.ID, &t.Type, &t.Status, &t.OrderReference, &t.PickupCodeLast2, &t.LockerNumber, &t.TowerName,
			&t.Location, &t.City, &t.PinCode, &t.CreatedAt, &t.CompletedAt)
		return t, err
	})
	if err != nil {
		return nil, 0, err
	}
	return list, total, nil
}
