package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Pickup window statuses (docs/pickup-windows.md). The first three are live: at most one live
// window per locker.
const (
	WindowOpen            = "open"
	WindowOverdue         = "overdue"
	WindowReturnRequested = "return_requested"
	WindowPickedUp        = "picked_up"
	WindowReturned        = "returned"
)

// What a policy does when a window runs out.
const (
	// OnExpiryNotify marks the parcel overdue and tells the sender (parcel.overdue).
	OnExpiryNotify = "notify"
	// OnExpiryRequestReturn does that and also marks it for return (parcel.return_requested):
	// the sender's backend then takes a return token for its courier.
	OnExpiryRequestReturn = "request_return"
)

// markOverdue is the SET clause that marks window w (the alias) overdue when it runs out: from
// its end, and with the policy's request_return marked for return now as well. The workflow's
// step and the due pass's batch both mark with it.
const markOverdue = `status = CASE w.on_expiry WHEN '` + OnExpiryRequestReturn + `' THEN '` + WindowReturnRequested + `' ELSE '` + WindowOverdue + `' END,
	overdue_at = w.pickup_by, return_requested_at = CASE w.on_expiry WHEN '` + OnExpiryRequestReturn + `' THEN now() END`

// returnReasonRanOut is parcel.return_requested's reason when the window ran out.
const returnReasonRanOut = "window_ran_out"

// Event types of pickup windows (DESIGN §10's list, extended; docs/pickup-windows.md).
const (
	EventTypeParcelPickupReminder  = "parcel.pickup_reminder"
	EventTypeParcelPickupExtended  = "parcel.pickup_extended"
	EventTypeParcelOverdue         = "parcel.overdue"
	EventTypeParcelReturnRequested = "parcel.return_requested"
	EventTypeParcelReturned        = "parcel.returned"
)

// Policy bounds: what SetPickupPolicy accepts (the table's checks say the same).
const (
	MinWindowSeconds = 1
	MaxWindowSeconds = 30 * 24 * 3600
	MaxReminders     = 5
	MaxExtensions    = 10
)

// PickupPolicy is an organization's pickup window policy, or a location's override of it
// (LocationID set).
type PickupPolicy struct {
	OrgID            int64
	LocationID       *int64
	WindowSeconds    int
	ReminderOffsets  []int // seconds before the window's end, largest (earliest reminder) first
	MaxExtensions    int
	ExtensionSeconds int
	OnExpiry         string
	UpdatedAt        time.Time
}

// Normalize sorts and de-duplicates the reminder offsets (largest first) and checks the
// policy; the error is an *PolicyError naming the field.
func (p *PickupPolicy) Normalize() error {
	offs := slices.Clone(p.ReminderOffsets)
	slices.Sort(offs)
	offs = slices.Compact(offs)
	slices.Reverse(offs)
	p.ReminderOffsets = offs
	switch {
	case p.WindowSeconds < MinWindowSeconds || p.WindowSeconds > MaxWindowSeconds:
		return &PolicyError{Field: "window_seconds", Msg: fmt.Sprintf("must be between %d and %d", MinWindowSeconds, MaxWindowSeconds)}
	case len(offs) > MaxReminders:
		return &PolicyError{Field: "reminder_offsets_seconds", Msg: fmt.Sprintf("at most %d reminders", MaxReminders)}
	case len(offs) > 0 && (offs[len(offs)-1] < 1 || offs[0] >= p.WindowSeconds):
		return &PolicyError{Field: "reminder_offsets_seconds", Msg: "every offset must be at least 1 and less than window_seconds"}
	case p.MaxExtensions < 0 || p.MaxExtensions > MaxExtensions:
		return &PolicyError{Field: "max_extensions", Msg: fmt.Sprintf("must be between 0 and %d", MaxExtensions)}
	case p.MaxExtensions > 0 && (p.ExtensionSeconds < MinWindowSeconds || p.ExtensionSeconds > MaxWindowSeconds):
		return &PolicyError{Field: "extension_seconds", Msg: fmt.Sprintf("must be between %d and %d when extensions are allowed", MinWindowSeconds, MaxWindowSeconds)}
	case p.MaxExtensions == 0 && (p.ExtensionSeconds < 0 || p.ExtensionSeconds > MaxWindowSeconds):
		return &PolicyError{Field: "extension_seconds", Msg: fmt.Sprintf("must be between 0 and %d", MaxWindowSeconds)}
	case p.OnExpiry != OnExpiryNotify && p.OnExpiry != OnExpiryRequestReturn:
		return &PolicyError{Field: "on_expiry", Msg: `must be "notify" or "request_return"`}
	}
	return nil
}

// PolicyError is a policy the rules refuse.
type PolicyError struct {
	Field, Msg string
}

func (e *PolicyError) Error() string { return e.Field + ": " + e.Msg }

// PickupWindow is a parcel's pickup window: opened by the drop-off that made its locker
// occupied, with a snapshot of the policy then in force.
type PickupWindow struct {
	ID                uuid.UUID
	OrgID             int64
	LocationID        int64
	TowerID           string
	LockerID          int64
	LockerName        string
	ClientID          string
	DropoffTokenID    uuid.UUID
	Status            string
	OpenedAt          time.Time
	PickupBy          time.Time
	WindowSeconds     int
	ReminderOffsets   []int
	RemindersSent     int
	MaxExtensions     int
	ExtensionsUsed    int
	ExtensionSeconds  int
	OnExpiry          string
	OverdueAt         *time.Time
	ReturnRequestedAt *time.Time
	ReturnTokenIDs    []uuid.UUID
	ClosedAt          *time.Time
}

// Live reports whether the window still belongs to a parcel in its locker.
func (w PickupWindow) Live() bool { return w.ClosedAt == nil }

// ReminderAt is when reminder i (0-based) is due.
func (w PickupWindow) ReminderAt(i int) time.Time {
	return w.PickupBy.Add(-time.Duration(w.ReminderOffsets[i]) * time.Second)
}

// EndBackstop is how long after a window's end its workflow's timer fires. The due pass
// (MarkDuePickupWindows, every 250 ms in the worker) marks the windows past their end in
// set-based batches, so thousands ending in the same second are marked within it; the
// workflow's step after it finds the mark made and ends, or makes the mark itself (overdue_at
// is still the end) when no pass ran. Firing at the end itself would put a workflow task and
// a row lock per window against the pass at the very moment it marks them.
const EndBackstop = 2 * time.Second

// NextAt is when the window's workflow must next act: the next reminder not yet sent, else
// the end and its backstop (EndBackstop); zero when the window is no longer open (nothing
// more is scheduled).
func (w PickupWindow) NextAt() time.Time {
	if w.Status != WindowOpen {
		return time.Time{}
	}
	if w.RemindersSent < len(w.ReminderOffsets) {
		return w.ReminderAt(w.RemindersSent)
	}
	return w.PickupBy.Add(EndBackstop)
}

// remindersDue is how many of the window's reminders are due at now.
func (w PickupWindow) remindersDue(now time.Time) int {
	n := 0
	for i := range w.ReminderOffsets {
		if !w.ReminderAt(i).After(now) {
			n = i + 1
		}
	}
	return n
}

const windowColumns = `w.id, w.organization_id, w.location_id, w.tower_id, w.locker_id, k.name, w.client_id, w.dropoff_token_id,
	w.status, w.opened_at, w.pickup_by, w.window_seconds, w.reminder_offsets_seconds, w.reminders_sent, w.max_extensions,
	w.extensions_used, w.extension_seconds, w.on_expiry, w.overdue_at, w.return_requested_at, w.return_token_ids, w.closed_at`

const windowFrom = ` FROM pickup_windows w JOIN lockers k ON k.id = w.locker_id`

func scanWindow(row pgx.Row) (PickupWindow, error) {
	var w PickupWindow
	var offs []int32
	err := row.Scan(windowDest(&w, &offs)...)
	w.ReminderOffsets = ints(offs)
	return w, err
}

// windowDest are the scan destinations of windowColumns; offs receives the reminder offsets.
func windowDest(w *PickupWindow, offs *[]int32) []any {
	return []any{&w.ID, &w.OrgID, &w.LocationID, &w.TowerID, &w.LockerID, &w.LockerName, &w.ClientID, &w.DropoffTokenID,
		&w.Status, &w.OpenedAt, &w.PickupBy, &w.WindowSeconds, offs, &w.RemindersSent, &w.MaxExtensions,
		&w.ExtensionsUsed, &w.ExtensionSeconds, &w.OnExpiry, &w.OverdueAt, &w.ReturnRequestedAt, &w.ReturnTokenIDs, &w.ClosedAt}
}

func ints(v []int32) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

func int32s(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

// SetPickupPolicy saves the organization's policy (p.LocationID nil) or a location's override
// (the location must be the organization's: else ErrNotFound). Windows already running keep
// the policy they opened with unless applyToOpen: then every open window the policy governs is
// re-timed from its opening (its extensions kept) and returned, so its workflow can be told.
func (s *Store) SetPickupPolicy(ctx context.Context, p PickupPolicy, applyToOpen bool) (PickupPolicy, []PickupWindow, error) {
	if err := p.Normalize(); err != nil {
		return PickupPolicy{}, nil, err
	}
	var changed []PickupWindow
	err := s.WithTx(ctx, func(tx *Store) error {
		if p.LocationID != nil {
			if err := tx.ownLocation(ctx, p.OrgID, *p.LocationID); err != nil {
				return err
			}
		}
		// Two statements for the two partial unique indexes (an upsert names one).
		tag, err := tx.db.Exec(ctx, `
			UPDATE pickup_policies SET window_seconds = $3, reminder_offsets_seconds = $4, max_extensions = $5,
			       extension_seconds = $6, on_expiry = $7, updated_at = now()
			WHERE organization_id = $1 AND location_id IS NOT DISTINCT FROM $2`,
			p.OrgID, p.LocationID, p.WindowSeconds, int32s(p.ReminderOffsets), p.MaxExtensions, p.ExtensionSeconds, p.OnExpiry)
		if err != nil {
			return fmt.Errorf("save pickup policy: %w", translate(err))
		}
		if tag.RowsAffected() == 0 {
			_, err = tx.db.Exec(ctx, `
				INSERT INTO pickup_policies (organization_id, location_id, window_seconds, reminder_offsets_seconds, max_extensions,
				                             extension_seconds, on_expiry)
				VALUES ($1, $2, $3, $4, $5, $6, $7)`,
				p.OrgID, p.LocationID, p.WindowSeconds, int32s(p.ReminderOffsets), p.MaxExtensions, p.ExtensionSeconds, p.OnExpiry)
			if err != nil {
				return fmt.Errorf("save pickup policy: %w", translate(err))
			}
		}
		saved, err := tx.pickupPolicy(ctx, p.OrgID, p.LocationID)
		if err != nil {
			return err
		}
		p = saved
		if applyToOpen {
			changed, err = tx.retimeOpenWindows(ctx, p)
		}
		return err
	})
	if err != nil {
		return PickupPolicy{}, nil, err
	}
	return p, changed, nil
}

// retimeOpenWindows applies policy p to the open windows it governs (a location's: that
// location's; the organization's: those at locations without their own). Reminders whose new
// time has passed count as sent: a changed policy does not send them late.
func (s *Store) retimeOpenWindows(ctx context.Context, p PickupPolicy) ([]PickupWindow, error) {
	rows, err := s.db.Query(ctx, `
		UPDATE pickup_windows w SET window_seconds = $2, reminder_offsets_seconds = $3, max_extensions = $4,
		       extension_seconds = $5, on_expiry = $6,
		       pickup_by = w.opened_at + make_interval(secs => $2 + w.extensions_used * $5)
		FROM lockers k
		WHERE k.id = w.locker_id AND w.organization_id = $1 AND w.status = 'open' AND w.closed_at IS NULL
		  AND CASE WHEN $7::bigint IS NOT NULL THEN w.location_id = $7
		           ELSE NOT EXISTS (SELECT 1 FROM pickup_policies pp WHERE pp.location_id = w.location_id) END
		RETURNING `+windowColumns, p.OrgID, p.WindowSeconds, int32s(p.ReminderOffsets), p.MaxExtensions, p.ExtensionSeconds,
		p.OnExpiry, p.LocationID)
	if err != nil {
		return nil, fmt.Errorf("apply pickup policy: %w", translate(err))
	}
	ws, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PickupWindow, error) { return scanWindow(r) })
	if err != nil {
		return nil, fmt.Errorf("apply pickup policy: %w", translate(err))
	}
	now, err := s.now(ctx)
	if err != nil {
		return nil, err
	}
	for i := range ws {
		ws[i].RemindersSent = ws[i].remindersDue(now)
		if _, err := s.db.Exec(ctx, `UPDATE pickup_windows SET reminders_sent = $2 WHERE id = $1`, ws[i].ID, ws[i].RemindersSent); err != nil {
			return nil, fmt.Errorf("apply pickup policy: %w", translate(err))
		}
	}
	return ws, nil
}

func (s *Store) now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.db.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read the clock: %w", translate(err))
	}
	return now, nil
}

// ownLocation is nil when location id is the organization's, else ErrNotFound.
func (s *Store) ownLocation(ctx context.Context, orgID, id int64) error {
	var ok bool
	if err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM locations WHERE id = $1 AND organization_id = $2)`, id, orgID).Scan(&ok); err != nil {
		return fmt.Errorf("find location: %w", translate(err))
	}
	if !ok {
		return fmt.Errorf("location %d: %w", id, ErrNotFound)
	}
	return nil
}

const policyColumns = `organization_id, location_id, window_seconds, reminder_offsets_seconds, max_extensions, extension_seconds, on_expiry, updated_at`

func scanPolicy(row pgx.Row) (PickupPolicy, error) {
	var p PickupPolicy
	var offs []int32
	err := row.Scan(&p.OrgID, &p.LocationID, &p.WindowSeconds, &offs, &p.MaxExtensions, &p.ExtensionSeconds, &p.OnExpiry, &p.UpdatedAt)
	p.ReminderOffsets = make([]int, len(offs))
	for i, o := range offs {
		p.ReminderOffsets[i] = int(o)
	}
	return p, err
}

// pickupPolicy is the policy saved for exactly (orgID, locationID); ErrNotFound if none.
func (s *Store) pickupPolicy(ctx context.Context, orgID int64, locationID *int64) (PickupPolicy, error) {
	p, err := scanPolicy(s.db.QueryRow(ctx, `SELECT `+policyColumns+` FROM pickup_policies
		WHERE organization_id = $1 AND location_id IS NOT DISTINCT FROM $2`, orgID, locationID))
	if err != nil {
		return PickupPolicy{}, fmt.Errorf("pickup policy: %w", translate(err))
	}
	return p, nil
}

// PickupPolicy is the policy saved for the organization (locationID nil) or for a location of
// it; ErrNotFound when there is none (an unknown location or another organization's alike).
func (s *Store) PickupPolicy(ctx context.Context, orgID int64, locationID *int64) (PickupPolicy, error) {
	if locationID != nil {
		if err := s.ownLocation(ctx, orgID, *locationID); err != nil {
			return PickupPolicy{}, err
		}
	}
	return s.pickupPolicy(ctx, orgID, locationID)
}

// DeletePickupPolicy removes the organization's policy or a location's override; running
// windows keep theirs. ErrNotFound when there was none.
func (s *Store) DeletePickupPolicy(ctx context.Context, orgID int64, locationID *int64) error {
	if locationID != nil {
		if err := s.ownLocation(ctx, orgID, *locationID); err != nil {
			return err
		}
	}
	tag, err := s.db.Exec(ctx, `DELETE FROM pickup_policies WHERE organization_id = $1 AND location_id IS NOT DISTINCT FROM $2`, orgID, locationID)
	if err != nil {
		return fmt.Errorf("delete pickup policy: %w", translate(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pickup policy: %w", ErrNotFound)
	}
	return nil
}

// openPickupWindow opens the window of the parcel a drop-off token t just left in locker k
// (under its row lock), with the policy in force at the locker's location, from when the door
// closed. It returns nil when no policy applies or the locker already has a live window (an
// item added to an occupied locker keeps its window).
func (s *Store) openPickupWindow(ctx context.Context, k lockedLocker, t LockerToken, closedAt time.Time) (*PickupWindow, error) {
	w, err := scanWindow(s.db.QueryRow(ctx, `
		WITH p AS (
		    SELECT * FROM pickup_policies
		    WHERE organization_id = $2 AND (location_id = $3 OR location_id IS NULL)
		    ORDER BY location_id NULLS LAST LIMIT 1
		), w AS (
		    INSERT INTO pickup_windows (id, organization_id, location_id, tower_id, locker_id, client_id, dropoff_token_id,
		                                opened_at, pickup_by, window_seconds, reminder_offsets_seconds, max_extensions,
		                                extension_seconds, on_expiry)
		    SELECT $1, $2, $3, $4, $5, $6, $7, $8::timestamptz, $8::timestamptz + make_interval(secs => p.window_seconds), p.window_seconds,
		           p.reminder_offsets_seconds, p.max_extensions, p.extension_seconds, p.on_expiry
		    FROM p
		    WHERE NOT EXISTS (SELECT 1 FROM pickup_windows x WHERE x.locker_id = $5 AND x.closed_at IS NULL)
		    RETURNING *
		)
		SELECT `+windowColumns+` FROM w JOIN lockers k ON k.id = w.locker_id`,
		uuid.New(), t.OrgID, k.LocationID, k.TowerID, k.ID, t.ClientID, t.ID, closedAt))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open pickup window: %w", translate(err))
	}
	// Reminders already past (a late upload of the drop-off) count as sent.
	now, err := s.now(ctx)
	if err != nil {
		return nil, err
	}
	if n := w.remindersDue(now); n > 0 && len(w.ReminderOffsets) > 0 {
		w.RemindersSent = n - 1 // the latest due one still goes, at once
		if _, err := s.db.Exec(ctx, `UPDATE pickup_windows SET reminders_sent = $2 WHERE id = $1`, w.ID, w.RemindersSent); err != nil {
			return nil, fmt.Errorf("open pickup window: %w", translate(err))
		}
	}
	return &w, nil
}

// closePickupWindow closes locker k's live window at the pickup by token tokenID (the locker
// is free now): returned when the token was one of its return tokens (parcel.returned is
// recorded), else picked_up. It returns the closed window, or nil when there was none.
func (s *Store) closePickupWindow(ctx context.Context, k lockedLocker, tokenID uuid.UUID, at time.Time) (*PickupWindow, error) {
	w, err := scanWindow(s.db.QueryRow(ctx, `
		UPDATE pickup_windows w SET closed_at = $2,
		       status = CASE WHEN $3 = ANY (w.return_token_ids) THEN 'returned' ELSE 'picked_up' END
		FROM lockers k
		WHERE k.id = w.locker_id AND w.locker_id = $1 AND w.closed_at IS NULL
		RETURNING `+windowColumns, k.ID, at, tokenID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("close pickup window: %w", translate(err))
	}
	if w.Status == WindowReturned {
		if err := s.recordWindowEvent(ctx, EventTypeParcelReturned, w, nil); err != nil {
			return nil, err
		}
	}
	return &w, nil
}

// PickupWindowDue is the window workflow's step when its timer fires: under the window's row
// lock, an open window past its end becomes overdue (parcel.overdue, and with the policy's
// request_return also return_requested and parcel.return_requested); else the latest reminder
// due and not yet sent goes (parcel.pickup_reminder; earlier ones past with it are skipped, so
// a late timer never sends a burst). It returns the window as it is now: its NextAt is the
// workflow's next timer, zero when nothing more is scheduled. Idempotent: a repeat finds the
// step done and sends nothing.
func (s *Store) PickupWindowDue(ctx context.Context, id uuid.UUID) (PickupWindow, error) {
	var w PickupWindow
	err := s.WithTx(ctx, func(tx *Store) error {
		var err error
		w, err = scanWindow(tx.db.QueryRow(ctx, `SELECT `+windowColumns+windowFrom+` WHERE w.id = $1 FOR UPDATE OF w`, id))
		if err != nil {
			return fmt.Errorf("pickup window: %w", translate(err))
		}
		now, err := tx.now(ctx)
		if err != nil {
			return err
		}
		return tx.stepWindow(ctx, &w, now)
	})
	if err != nil {
		return PickupWindow{}, err
	}
	return w, nil
}

// stepWindow is a window's step at now under its row lock: the overdue mark, or the latest
// reminder due and not yet sent, or nothing.
func (s *Store) stepWindow(ctx context.Context, w *PickupWindow, now time.Time) error {
	if w.Status != WindowOpen || w.ClosedAt != nil {
		return nil
	}
	if !w.PickupBy.After(now) {
		return s.windowOverdue(ctx, w)
	}
	due := w.remindersDue(now)
	if due <= w.RemindersSent {
		return nil // the timer ran ahead of the database clock: NextAt says when
	}
	w.RemindersSent = due
	if _, err := s.db.Exec(ctx, `UPDATE pickup_windows SET reminders_sent = $2 WHERE id = $1`, w.ID, due); err != nil {
		return fmt.Errorf("send pickup reminder: %w", translate(err))
	}
	return s.recordWindowEvent(ctx, EventTypeParcelPickupReminder, *w, map[string]any{"reminder": due, "reminders": len(w.ReminderOffsets)})
}

// MarkDuePickupWindows is the due pass's batch: up to limit open windows past their end, the
// earliest first, each marked overdue as its workflow's step would mark it (windowOverdue: the
// same statuses and events), in one transaction; windows another pass or a workflow holds are
// skipped, and a workflow that fires later finds the mark made. It returns the windows it
// marked. The batch is set-based — one statement marks every window and reads its locker, one
// records every event — so thousands of windows ending in the same second are marked within
// it instead of one workflow task (or one round trip) each.
func (s *Store) MarkDuePickupWindows(ctx context.Context, limit int) ([]PickupWindow, error) {
	var marked []PickupWindow
	err := s.WithTx(ctx, func(tx *Store) error {
		rows, err := tx.db.Query(ctx, `
			WITH due AS (
			    SELECT id FROM pickup_windows
			    WHERE closed_at IS NULL AND status = 'open' AND pickup_by <= now()
			    ORDER BY pickup_by LIMIT $1 FOR UPDATE SKIP LOCKED
			), w AS (
			    UPDATE pickup_windows w SET `+markOverdue+` FROM due WHERE w.id = due.id
			    RETURNING w.*
			)
			SELECT `+eventLockerColumns+`, `+windowColumns+`
			FROM w JOIN lockers k ON k.id = w.locker_id JOIN locker_types lt ON lt.id = k.locker_type_id
			     JOIN locations l ON l.id = k.location_id
			ORDER BY w.pickup_by`, limit)
		if err != nil {
			return fmt.Errorf("mark due pickup windows: %w", translate(err))
		}
		var evs []Event
		marked, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (PickupWindow, error) {
			var w PickupWindow
			var offs []int32
			locker, subOrg, err := scanEventLocker(r, windowDest(&w, &offs)...)
			if err != nil {
				return w, err
			}
			w.ReminderOffsets = ints(offs)
			evs = append(evs, overdueEvents(w, locker, subOrg)...)
			return w, nil
		})
		if err != nil {
			return fmt.Errorf("mark due pickup windows: %w", translate(err))
		}
		_, err = tx.RecordEvents(ctx, evs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return marked, nil
}

// NextPickupEnd is how long until the earliest end of an open window by the database's clock
// (the clock the due pass's marks compare with; negative when it has passed); false when no
// window is open. The due pass waits for it when it comes before the pass's next interval.
func (s *Store) NextPickupEnd(ctx context.Context) (time.Duration, bool, error) {
	var secs *float64
	err := s.db.QueryRow(ctx, `SELECT extract(epoch FROM min(pickup_by) - clock_timestamp())::float8
		FROM pickup_windows WHERE closed_at IS NULL AND status = 'open'`).Scan(&secs)
	if err != nil {
		return 0, false, fmt.Errorf("next pickup end: %w", translate(err))
	}
	if secs == nil {
		return 0, false, nil
	}
	return time.Duration(*secs * float64(time.Second)), true, nil
}

// windowOverdue marks window w overdue (markOverdue) under its row lock and records its events.
func (s *Store) windowOverdue(ctx context.Context, w *PickupWindow) error {
	err := s.db.QueryRow(ctx, `UPDATE pickup_windows w SET `+markOverdue+` WHERE w.id = $1
		RETURNING w.status, w.overdue_at, w.return_requested_at`, w.ID).Scan(&w.Status, &w.OverdueAt, &w.ReturnRequestedAt)
	if err != nil {
		return fmt.Errorf("mark parcel overdue: %w", translate(err))
	}
	locker, subOrg, err := s.eventLocker(ctx, w.LockerID)
	if err != nil {
		return fmt.Errorf("record %s: %w", EventTypeParcelOverdue, err)
	}
	_, err = s.RecordEvents(ctx, overdueEvents(*w, locker, subOrg))
	return err
}

// overdueEvents are the events of window w marked overdue: parcel.overdue, and with the
// policy's request_return also parcel.return_requested.
func overdueEvents(w PickupWindow, locker EventLocker, subOrg *int64) []Event {
	evs := []Event{{OrgID: w.OrgID, SubOrgID: subOrg, Type: EventTypeParcelOverdue, Data: EventParcel{Locker: locker, Window: w.Event()}}}
	if w.Status == WindowReturnRequested {
		evs = append(evs, Event{OrgID: w.OrgID, SubOrgID: subOrg, Type: EventTypeParcelReturnRequested,
			Data: EventParcel{Locker: locker, Window: w.Event(), Detail: map[string]any{"reason": returnReasonRanOut}}})
	}
	return evs
}

// PickupWindowFor is the caller's latest window of a locker (live or closed): the parcel it
// left there. ErrNotFound when the locker is not the organization's or the caller never had
// a window there.
func (s *Store) PickupWindowFor(ctx context.Context, orgID int64, clientID, towerID string, lockerID int64) (PickupWindow, error) {
	w, err := scanWindow(s.db.QueryRow(ctx, `SELECT `+windowColumns+windowFrom+`
		WHERE w.locker_id = $1 AND w.tower_id = $2 AND w.organization_id = $3 AND w.client_id = $4
		ORDER BY w.opened_at DESC LIMIT 1`, lockerID, strings.ToLower(towerID), orgID, clientID))
	if err != nil {
		return PickupWindow{}, fmt.Errorf("pickup window: %w", translate(err))
	}
	return w, nil
}

// lockWindowFor locks the caller's live window of a locker for a change, refusing as the API
// does: ErrNotFound for another organization's locker, a conflict naming why otherwise.
func (s *Store) lockWindowFor(ctx context.Context, orgID int64, clientID, towerID string, lockerID int64) (PickupWindow, error) {
	k, err := s.lockLocker(ctx, orgID, towerID, lockerID)
	if err != nil {
		return PickupWindow{}, err
	}
	w, err := scanWindow(s.db.QueryRow(ctx, `SELECT `+windowColumns+windowFrom+`
		WHERE w.locker_id = $1 AND w.client_id = $2 ORDER BY w.opened_at DESC LIMIT 1 FOR UPDATE OF w`, k.ID, clientID))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return PickupWindow{}, &StatusConflictError{Status: k.Status,
			Msg: fmt.Sprintf("locker %d has no pickup window of yours (its status is %s)", k.ID, k.Status.Name())}
	case err != nil:
		return PickupWindow{}, fmt.Errorf("pickup window: %w", translate(err))
	case w.ClosedAt != nil:
		return PickupWindow{}, w.ClosedError()
	}
	return w, nil
}

// ClosedError is the refusal of a change to a closed window (nil while it is live).
func (w PickupWindow) ClosedError() error {
	if w.ClosedAt == nil {
		return nil
	}
	how := "picked up"
	if w.Status == WindowReturned {
		how = "returned"
	}
	return &StatusConflictError{Msg: fmt.Sprintf("the parcel in locker %d was already %s at %s", w.LockerID, how, w.ClosedAt.UTC().Format(time.RFC3339))}
}

// ExtendPickupWindow moves the end of the caller's open window of a locker by the policy's
// extension, if one is left (parcel.pickup_extended). Reminders whose new time has passed count
// as sent. Call it inside WithTx; the caller tells the window's workflow.
func (s *Store) ExtendPickupWindow(ctx context.Context, orgID int64, clientID, towerID string, lockerID int64) (PickupWindow, error) {
	w, err := s.lockWindowFor(ctx, orgID, clientID, towerID, lockerID)
	if err != nil {
		return PickupWindow{}, err
	}
	switch {
	case w.Status != WindowOpen:
		return PickupWindow{}, &StatusConflictError{Msg: fmt.Sprintf("the pickup window of locker %d ran out at %s (status %s): it can no longer be extended",
			w.LockerID, w.PickupBy.UTC().Format(time.RFC3339), w.Status)}
	case w.ExtensionsUsed >= w.MaxExtensions:
		return PickupWindow{}, &StatusConflictError{Msg: fmt.Sprintf("the pickup window of locker %d has no extensions left (%d of %d used)",
			w.LockerID, w.ExtensionsUsed, w.MaxExtensions)}
	}
	now, err := s.now(ctx)
	if err != nil {
		return PickupWindow{}, err
	}
	w.PickupBy = w.PickupBy.Add(time.Duration(w.ExtensionSeconds) * time.Second)
	w.ExtensionsUsed++
	w.RemindersSent = w.remindersDue(now)
	_, err = s.db.Exec(ctx, `UPDATE pickup_windows SET pickup_by = $2, extensions_used = $3, reminders_sent = $4 WHERE id = $1`,
		w.ID, w.PickupBy, w.ExtensionsUsed, w.RemindersSent)
	if err != nil {
		return PickupWindow{}, fmt.Errorf("extend pickup window: %w", translate(err))
	}
	return w, s.recordWindowEvent(ctx, EventTypeParcelPickupExtended, w, nil)
}

// RequestPickupReturn marks the caller's live window of a locker for return with the return
// token tokenID (a pickup token issued in the same transaction for the sender's courier):
// parcel.return_requested. Using that token at the tower closes the window as returned.
func (s *Store) RequestPickupReturn(ctx context.Context, orgID int64, clientID, towerID string, lockerID int64, tokenID uuid.UUID) (PickupWindow, error) {
	w, err := s.lockWindowFor(ctx, orgID, clientID, towerID, lockerID)
	if err != nil {
		return PickupWindow{}, err
	}
	now, err := s.now(ctx)
	if err != nil {
		return PickupWindow{}, err
	}
	if w.ReturnRequestedAt == nil {
		w.ReturnRequestedAt = &now
	}
	w.Status = WindowReturnRequested
	w.ReturnTokenIDs = append(w.ReturnTokenIDs, tokenID)
	_, err = s.db.Exec(ctx, `UPDATE pickup_windows SET status = 'return_requested', return_requested_at = $2, return_token_ids = $3 WHERE id = $1`,
		w.ID, *w.ReturnRequestedAt, w.ReturnTokenIDs)
	if err != nil {
		return PickupWindow{}, fmt.Errorf("request return: %w", translate(err))
	}
	return w, s.recordWindowEvent(ctx, EventTypeParcelReturnRequested, w, map[string]any{"reason": "sender", "tokenId": tokenID})
}

// PickupWindowFilter selects windows for a list.
type PickupWindowFilter struct {
	OrgID      int64
	SubOrgID   *int64 // a sub-organization key's scope
	LocationID *int64
	ClientID   string // the tower API's caller: only its parcels ("" for any)
	Overdue    bool   // only live windows past their end
	Status     string // "" for every live window; a status (closed ones included)
	Limit      int
}

// PickupWindows lists windows, the latest end first. An unknown location or another
// organization's gives an empty list; callers that must answer 404 check the location first.
func (s *Store) PickupWindows(ctx context.Context, f PickupWindowFilter) ([]PickupWindow, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 500
	}
	rows, err := s.db.Query(ctx, `SELECT `+windowColumns+windowFrom+` JOIN locations l ON l.id = w.location_id
		WHERE w.organization_id = $1
		  AND ($2::bigint IS NULL OR l.sub_organization_id = $2)
		  AND ($3::bigint IS NULL OR w.location_id = $3)
		  AND ($4 = '' OR w.client_id = $4)
		  AND (NOT $5 OR (w.overdue_at IS NOT NULL AND w.closed_at IS NULL))
		  AND (CASE WHEN $6 = '' THEN w.closed_at IS NULL ELSE w.status = $6 END)
		ORDER BY w.pickup_by, w.id LIMIT $7`,
		f.OrgID, f.SubOrgID, f.LocationID, f.ClientID, f.Overdue, f.Status, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list pickup windows: %w", translate(err))
	}
	ws, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PickupWindow, error) { return scanWindow(r) })
	if err != nil {
		return nil, fmt.Errorf("list pickup windows: %w", translate(err))
	}
	return ws, nil
}

// LocationOfOrg is nil when location id is the organization's, else ErrNotFound.
func (s *Store) LocationOfOrg(ctx context.Context, orgID, id int64) error {
	return s.ownLocation(ctx, orgID, id)
}

// EventPickupWindow is a window as the API shows it.
type EventPickupWindow struct {
	ID                uuid.UUID  `json:"id"`
	Status            string     `json:"status"`
	OpenedAt          EventTime  `json:"openedAt"`
	PickupBy          EventTime  `json:"pickupBy"`
	RemindersSent     int        `json:"remindersSent"`
	Reminders         int        `json:"reminders"`
	NextReminderAt    *EventTime `json:"nextReminderAt"`
	ExtensionsUsed    int        `json:"extensionsUsed"`
	ExtensionsLeft    int        `json:"extensionsLeft"`
	ExtensionSeconds  int        `json:"extensionSeconds"`
	OnExpiry          string     `json:"onExpiry"`
	OverdueAt         *EventTime `json:"overdueAt"`
	ReturnRequestedAt *EventTime `json:"returnRequestedAt"`
	ClosedAt          *EventTime `json:"closedAt"`
	DropoffTokenID    uuid.UUID  `json:"dropoffTokenId"`
}

// Event is the window as events and the API show it.
func (w PickupWindow) Event() EventPickupWindow {
	e := EventPickupWindow{ID: w.ID, Status: w.Status, OpenedAt: EventTime(w.OpenedAt), PickupBy: EventTime(w.PickupBy),
		RemindersSent: w.RemindersSent, Reminders: len(w.ReminderOffsets), ExtensionsUsed: w.ExtensionsUsed,
		ExtensionsLeft: max(w.MaxExtensions-w.ExtensionsUsed, 0), ExtensionSeconds: w.ExtensionSeconds, OnExpiry: w.OnExpiry,
		OverdueAt: eventTimePtr(w.OverdueAt), ReturnRequestedAt: eventTimePtr(w.ReturnRequestedAt), ClosedAt: eventTimePtr(w.ClosedAt),
		DropoffTokenID: w.DropoffTokenID}
	if w.Status == WindowOpen && w.RemindersSent < len(w.ReminderOffsets) {
		at := EventTime(w.ReminderAt(w.RemindersSent))
		e.NextReminderAt = &at
	}
	if w.Status != WindowOpen {
		e.ExtensionsLeft = 0
	}
	return e
}

// EventParcel is the data of a parcel.* event: the locker as the API shows it now, the window,
// and what the event adds (a reminder's number, a return's reason and token).
type EventParcel struct {
	Locker EventLocker       `json:"locker"`
	Window EventPickupWindow `json:"window"`
	Detail map[string]any    `json:"detail,omitempty"`
}

// recordWindowEvent records event typ of window w, with the locker as it is now.
func (s *Store) recordWindowEvent(ctx context.Context, typ string, w PickupWindow, detail map[string]any) error {
	locker, subOrg, err := s.eventLocker(ctx, w.LockerID)
	if err != nil {
		return fmt.Errorf("record %s: %w", typ, err)
	}
	_, err = s.RecordEvent(ctx, Event{OrgID: w.OrgID, SubOrgID: subOrg, Type: typ,
		Data: EventParcel{Locker: locker, Window: w.Event(), Detail: detail}})
	return err
}

// eventLocker reads locker id as events show it, with its location's sub-organization.
func (s *Store) eventLocker(ctx context.Context, id int64) (EventLocker, *int64, error) {
	k, subOrg, err := scanEventLocker(s.db.QueryRow(ctx, `SELECT `+eventLockerColumns+`
		FROM lockers k JOIN locker_types lt ON lt.id = k.locker_type_id JOIN locations l ON l.id = k.location_id
		WHERE k.id = $1`, id))
	return k, subOrg, translate(err)
}

// PickupStats are the live windows' figures the metrics export.
type PickupStats struct {
	Live []struct {
		LocationID int64
		Status     string
		Count      int
	}
	// MarkLag is how long ago the end of the oldest still-open window passed (0 when none).
	MarkLag time.Duration
}

// PickupStats counts the live windows by location and status, and reads the overdue-mark lag.
func (s *Store) PickupStats(ctx context.Context) (PickupStats, error) {
	var st PickupStats
	rows, err := s.db.Query(ctx, `SELECT location_id, status, count(*) FROM pickup_windows WHERE closed_at IS NULL
		GROUP BY location_id, status ORDER BY location_id, status`)
	if err != nil {
		return st, fmt.Errorf("pickup stats: %w", translate(err))
	}
	for rows.Next() {
		var l struct {
			LocationID int64
			Status     string
			Count      int
		}
		if err := rows.Scan(&l.LocationID, &l.Status, &l.Count); err != nil {
			rows.Close()
			return st, fmt.Errorf("pickup stats: %w", translate(err))
		}
		st.Live = append(st.Live, l)
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("pickup stats: %w", translate(err))
	}
	var secs float64
	if err := s.db.QueryRow(ctx, `SELECT coalesce(extract(epoch FROM now() - min(pickup_by)), 0) FROM pickup_windows
		WHERE closed_at IS NULL AND status = 'open' AND pickup_by <= now()`).Scan(&secs); err != nil {
		return st, fmt.Errorf("pickup stats: %w", translate(err))
	}
	st.MarkLag = time.Duration(secs * float64(time.Second))
	return st, nil
}
