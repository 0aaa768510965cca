package apiserver

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/store"
)

// PickupWindowBody is a parcel's pickup window as the tower API shows it (docs/pickup-windows.md).
type PickupWindowBody struct {
	ID                uuid.UUID  `json:"id"`
	LockerID          int64      `json:"lockerId"`
	LockerName        string     `json:"lockerName"`
	TowerID           string     `json:"towerId"`
	LocationID        int64      `json:"locationId"`
	Status            string     `json:"status" enum:"open,overdue,return_requested,picked_up,returned"`
	OpenedAt          Timestamp  `json:"openedAt" doc:"When the drop-off closed the door with the item inside (the tower's clock)"`
	PickupBy          Timestamp  `json:"pickupBy" doc:"The end of the window, extensions included"`
	Reminders         int        `json:"reminders" doc:"How many reminders the window's policy sends before pickupBy"`
	RemindersSent     int        `json:"remindersSent"`
	NextReminderAt    *Timestamp `json:"nextReminderAt" nullable:"true"`
	ExtensionsUsed    int        `json:"extensionsUsed"`
	ExtensionsLeft    int        `json:"extensionsLeft"`
	ExtensionSeconds  int        `json:"extensionSeconds" doc:"What one extension adds"`
	OnExpiry          string     `json:"onExpiry" enum:"notify,request_return"`
	OverdueAt         *Timestamp `json:"overdueAt" nullable:"true"`
	ReturnRequestedAt *Timestamp `json:"returnRequestedAt" nullable:"true"`
	ClosedAt          *Timestamp `json:"closedAt" nullable:"true" doc:"When the parcel was picked up or returned"`
	DropoffTokenID    uuid.UUID  `json:"dropoffTokenId"`
}

func tsp(t *store.EventTime) *Timestamp {
	if t == nil {
		return nil
	}
	v := Timestamp(*t)
	return &v
}

func pickupWindowBody(w store.PickupWindow) PickupWindowBody {
	e := w.Event()
	return PickupWindowBody{ID: w.ID, LockerID: w.LockerID, LockerName: w.LockerName, TowerID: w.TowerID, LocationID: w.LocationID,
		Status: e.Status, OpenedAt: ts(w.OpenedAt), PickupBy: ts(w.PickupBy), Reminders: e.Reminders, RemindersSent: e.RemindersSent,
		NextReminderAt: tsp(e.NextReminderAt), ExtensionsUsed: e.ExtensionsUsed, ExtensionsLeft: e.ExtensionsLeft,
		ExtensionSeconds: e.ExtensionSeconds, OnExpiry: e.OnExpiry, OverdueAt: tsp(e.OverdueAt),
		ReturnRequestedAt: tsp(e.ReturnRequestedAt), ClosedAt: tsp(e.ClosedAt), DropoffTokenID: w.DropoffTokenID}
}

// ReturnBody answers a return request: the window, marked for return, and the return token
// for the sender's courier (a pickup token: using it at the tower closes the window as returned).
type ReturnBody struct {
	Window PickupWindowBody `json:"window"`
	Token  TokenBody        `json:"token"`
}

// OverdueLockerBody is an overdue locker of a location: the locker and its parcel's window.
type OverdueLockerBody struct {
	Locker LockerBody       `json:"locker"`
	Window PickupWindowBody `json:"window"`
}

func (s *Server) registerPickupWindows(api huma.API) {
	tags := []string{"Pickup windows"}
	const path = "/api/v1/towers/{tower_id}/lockers/{locker_id}/pickup-window"
	huma.Register(api, op(huma.Operation{
		OperationID: "get-pickup-window", Method: http.MethodGet, Path: path, Tags: tags,
		Summary: "The pickup window of the caller's parcel in a locker",
		Description: "The latest window of the caller's parcel in this locker, live or closed (picked up, returned). " +
			"404 when the caller never left a parcel there under a pickup policy, or the locker is another organization's.",
		Security: needs(jwtauth.ScopeServiceProvider),
	}), s.getPickupWindow)

	huma.Register(api, op(huma.Operation{
		OperationID: "extend-pickup-window", Method: http.MethodPost, Path: path + "/extensions", Tags: tags,
		Summary: "Extend the pickup window of the caller's parcel",
		Description: "Moves pickupBy by the policy's extensionSeconds while the window is open and extensions are left. " +
			"409 with a detail saying why otherwise (no window, no extensions left, overdue, already picked up). Records parcel.pickup_extended.",
		Security: needs(jwtauth.ScopeServiceProvider),
	}), s.extendPickupWindow)

	huma.Register(api, op(huma.Operation{
		OperationID: "return-parcel", Method: http.MethodPost, Path: path + "/return", Tags: tags,
		Summary: "Mark the caller's parcel for return and take a return token",
		Description: "For a live window (open, overdue or already marked for return): the window becomes return_requested and " +
			"the answer carries a return token for the sender's courier — a pickup token; using it at the tower closes the window " +
			"as returned (parcel.returned). Records parcel.return_requested. Asking again issues another token.",
		DefaultStatus: http.StatusCreated, Security: needs(jwtauth.ScopeServiceProvider),
	}), s.returnParcel)

	huma.Register(api, op(huma.Operation{
		OperationID: "list-overdue-lockers", Method: http.MethodGet, Path: "/api/v1/locations/{location_id}/overdue-lockers", Tags: tags,
		Summary:     "The lockers of a location whose parcel is overdue",
		Description: "Every locker of the organization at the location holding a parcel past its window (overdue or marked for return after it), the longest overdue first.",
		Security:    needs(jwtauth.ScopeServiceProvider),
	}), s.listOverdueLockers)
}

// getPickupWindow answers GET …/pickup-window: the caller's latest window of the locker.
func (s *Server) getPickupWindow(ctx context.Context, in *struct{ LockerPath }) (*struct{ Body PickupWindowBody }, error) {
	p := principal(ctx)
	w, err := s.deps.Store.PickupWindowFor(ctx, p.OrgID, p.ClientID, in.TowerID, in.LockerID)
	if err != nil {
		return nil, s.towerError(ctx, "pickup window", err)
	}
	return &struct{ Body PickupWindowBody }{Body: pickupWindowBody(w)}, nil
}

// extendPickupWindow answers POST …/pickup-window/extensions: one extension, with its signal to the
// window's workflow.
func (s *Server) extendPickupWindow(ctx context.Context, in *struct{ LockerPath }) (*struct{ Body PickupWindowBody }, error) {
	p := principal(ctx)
	var w store.PickupWindow
	err := s.record(ctx, func(tx *store.Store) ([]store.OutboxItem, error) {
		var err error
		if w, err = tx.ExtendPickupWindow(ctx, p.OrgID, p.ClientID, in.TowerID, in.LockerID); err != nil {
			return nil, err
		}
		return []store.OutboxItem{outbox.PickupWindowItem(w, true)}, nil
	})
	if err != nil {
		return nil, s.towerError(ctx, "pickup window", err)
	}
	return &struct{ Body PickupWindowBody }{Body: pickupWindowBody(w)}, nil
}

// returnParcel answers POST …/pickup-window/return: the window marked for return and a return
// token for the sender's courier, in one transaction.
func (s *Server) returnParcel(ctx context.Context, in *struct {
	LockerPath
	Body LockerTokenRequest
}) (*struct{ Body ReturnBody }, error) {
	p := principal(ctx)
	// A parcel already picked up or returned is refused in those words (the locker is free by
	// then, and the token's own refusal would only name its status); every other refusal comes
	// from the transaction below, under the locks: no window of the caller's → 409, another
	// organization's locker → 404.
	if cur, err := s.deps.Store.PickupWindowFor(ctx, p.OrgID, p.ClientID, in.TowerID, in.LockerID); err == nil && !cur.Live() {
		return nil, s.towerError(ctx, "pickup window", cur.ClosedError())
	}
	var w store.PickupWindow
	token, err := s.issueToken(ctx, in.TowerID, in.LockerID, store.TokenPickup, in.Body,
		func(tx *store.Store, t store.LockerToken, _, _ string) ([]store.OutboxItem, error) {
			var err error
			if w, err = tx.RequestPickupReturn(ctx, p.OrgID, p.ClientID, in.TowerID, in.LockerID, t.ID); err != nil {
				return nil, err
			}
			return []store.OutboxItem{outbox.PickupWindowItem(w, true)}, nil
		})
	if err != nil {
		return nil, s.towerError(ctx, "pickup window", err)
	}
	return &struct{ Body ReturnBody }{Body: ReturnBody{Window: pickupWindowBody(w), Token: token}}, nil
}

// listOverdueLockers answers GET /api/v1/locations/{location_id}/overdue-lockers.
func (s *Server) listOverdueLockers(ctx context.Context, in *struct {
	LocationID int64 `path:"location_id"`
}) (*struct{ Body []OverdueLockerBody }, error) {
	orgID := principal(ctx).OrgID
	ks, err := s.deps.Store.LocationLockers(ctx, orgID, in.LocationID)
	if err != nil {
		return nil, s.towerError(ctx, "location", err)
	}
	ws, err := s.deps.Store.PickupWindows(ctx, store.PickupWindowFilter{OrgID: orgID, LocationID: &in.LocationID, Overdue: true})
	if err != nil {
		return nil, s.towerError(ctx, "location", err)
	}
	byID := make(map[int64]store.Locker, len(ks))
	for _, k := range ks {
		byID[k.ID] = k
	}
	out := make([]OverdueLockerBody, 0, len(ws))
	for _, w := range ws {
		if k, ok := byID[w.LockerID]; ok {
			out = append(out, OverdueLockerBody{Locker: lockerBody(k), Window: pickupWindowBody(w)})
		}
	}
	return &struct{ Body []OverdueLockerBody }{Body: out}, nil
}
