package apiserver

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/store"
)

// PickupPolicyRequest sets an organization's pickup window policy, or a location's override.
type PickupPolicyRequest struct {
	WindowSeconds          int    `json:"window_seconds" minimum:"1" maximum:"2592000" doc:"How long the recipient has to collect a parcel, from the drop-off"`
	ReminderOffsetsSeconds []int  `json:"reminder_offsets_seconds,omitempty" maxItems:"5" doc:"Reminders, in seconds before the end (each ≥ 1 and < window_seconds)"`
	MaxExtensions          int    `json:"max_extensions,omitempty" minimum:"0" maximum:"10" doc:"How many times a window may be extended"`
	ExtensionSeconds       int    `json:"extension_seconds,omitempty" minimum:"0" maximum:"2592000" doc:"What one extension adds (≥ 1 when extensions are allowed)"`
	OnExpiry               string `json:"on_expiry,omitempty" enum:"notify,request_return" doc:"When a window runs out: notify (parcel.overdue) or request_return (also marks it for return: parcel.return_requested). Default notify."`
	ApplyToOpenWindows     bool   `json:"apply_to_open_windows,omitempty" doc:"Re-time the open windows this policy governs from their drop-off (their extensions kept); by default running windows keep the policy they opened with"`
}

// PickupPolicyBody is a saved policy.
type PickupPolicyBody struct {
	LocationID             *int64    `json:"location_id" nullable:"true" doc:"null: the organization's policy"`
	WindowSeconds          int       `json:"window_seconds"`
	ReminderOffsetsSeconds []int     `json:"reminder_offsets_seconds" doc:"Largest (earliest reminder) first"`
	MaxExtensions          int       `json:"max_extensions"`
	ExtensionSeconds       int       `json:"extension_seconds"`
	OnExpiry               string    `json:"on_expiry" enum:"notify,request_return"`
	UpdatedAt              Timestamp `json:"updated_at"`
	RetimedWindows         *int      `json:"retimed_windows,omitempty" doc:"With apply_to_open_windows: how many open windows were re-timed"`
}

func pickupPolicyBody(p store.PickupPolicy) PickupPolicyBody {
	return PickupPolicyBody{LocationID: p.LocationID, WindowSeconds: p.WindowSeconds, ReminderOffsetsSeconds: p.ReminderOffsets,
		MaxExtensions: p.MaxExtensions, ExtensionSeconds: p.ExtensionSeconds, OnExpiry: p.OnExpiry, UpdatedAt: ts(p.UpdatedAt)}
}

// AppPickupWindowBody is a pickup window as the app engine API shows it (snake_case).
type AppPickupWindowBody struct {
	ID                string     `json:"id"`
	LocationID        int64      `json:"location_id"`
	TowerID           string     `json:"tower_id"`
	LockerID          int64      `json:"locker_id"`
	LockerName        string     `json:"locker_name"`
	Status            string     `json:"status" enum:"open,overdue,return_requested,picked_up,returned"`
	OpenedAt          Timestamp  `json:"opened_at"`
	PickupBy          Timestamp  `json:"pickup_by"`
	Reminders         int        `json:"reminders"`
	RemindersSent     int        `json:"reminders_sent"`
	NextReminderAt    *Timestamp `json:"next_reminder_at" nullable:"true"`
	ExtensionsUsed    int        `json:"extensions_used"`
	ExtensionsLeft    int        `json:"extensions_left"`
	OnExpiry          string     `json:"on_expiry"`
	OverdueAt         *Timestamp `json:"overdue_at" nullable:"true"`
	ReturnRequestedAt *Timestamp `json:"return_requested_at" nullable:"true"`
	ClosedAt          *Timestamp `json:"closed_at" nullable:"true"`
}

func appPickupWindowBody(w store.PickupWindow) AppPickupWindowBody {
	b := pickupWindowBody(w)
	return AppPickupWindowBody{ID: w.ID.String(), LocationID: w.LocationID, TowerID: w.TowerID, LockerID: w.LockerID,
		LockerName: w.LockerName, Status: b.Status, OpenedAt: b.OpenedAt, PickupBy: b.PickupBy, Reminders: b.Reminders,
		RemindersSent: b.RemindersSent, NextReminderAt: b.NextReminderAt, ExtensionsUsed: b.ExtensionsUsed,
		ExtensionsLeft: b.ExtensionsLeft, OnExpiry: b.OnExpiry, OverdueAt: b.OverdueAt, ReturnRequestedAt: b.ReturnRequestedAt,
		ClosedAt: b.ClosedAt}
}

// LocationIDPath is a path with a location's id.
type LocationIDPath struct {
	LocationID int64 `path:"location_id" minimum:"1"`
}

type pickupPolicyOut struct{ Body PickupPolicyBody }

// PickupWindowsOut is the list of pickup windows.
type PickupWindowsOut struct {
	Body struct {
		Data []AppPickupWindowBody `json:"data"`
	}
}

func (s *Server) registerPickupPolicies(api huma.API) {
	for _, scope := range []struct{ path, what, suffix string }{
		{"/pickup-policy", "the organization's", ""},
		{"/locations/{location_id}/pickup-policy", "a location's override of the organization's", "-of-location"},
	} {
		getOp, putOp, delOp := pickupPolicyOps(scope.path, scope.what, scope.suffix)
		if scope.suffix == "" {
			huma.Register(api, getOp, func(ctx context.Context, _ *struct{}) (*pickupPolicyOut, error) { return s.getPickupPolicy(ctx, nil) })
			huma.Register(api, putOp, func(ctx context.Context, in *struct{ Body PickupPolicyRequest }) (*pickupPolicyOut, error) {
				return s.setPickupPolicy(ctx, nil, in.Body)
			})
			huma.Register(api, delOp, func(ctx context.Context, _ *struct{}) (*struct{}, error) { return s.deletePickupPolicy(ctx, nil) })
			continue
		}
		huma.Register(api, getOp, func(ctx context.Context, in *LocationIDPath) (*pickupPolicyOut, error) {
			return s.getPickupPolicy(ctx, &in.LocationID)
		})
		huma.Register(api, putOp, func(ctx context.Context, in *struct {
			LocationIDPath
			Body PickupPolicyRequest
		}) (*pickupPolicyOut, error) {
			return s.setPickupPolicy(ctx, &in.LocationID, in.Body)
		})
		huma.Register(api, delOp, func(ctx context.Context, in *LocationIDPath) (*struct{}, error) {
			return s.deletePickupPolicy(ctx, &in.LocationID)
		})
	}
	huma.Register(api, op(huma.Operation{
		OperationID: "list-pickup-windows", Method: http.MethodGet, Path: "/pickup-windows", Tags: []string{"Pickup windows"},
		Summary: "List pickup windows",
		Description: "The live windows of the key's scope (open, overdue, return_requested), the earliest end first; status= " +
			"selects one status (closed ones too), overdue=true only windows past their end, location_id= one location.",
		Security: needsAppKey,
	}), s.listPickupWindows)
}

// pickupPolicyOps are the get, set and delete operations of a policy at path.
func pickupPolicyOps(path, what, suffix string) (get, put, del huma.Operation) {
	tags := []string{"Pickup windows"}
	get = op(huma.Operation{OperationID: "get-pickup-policy" + suffix, Method: http.MethodGet, Path: path, Tags: tags,
		Summary:     "Get " + what + " pickup policy",
		Description: "404 when none is set (without a policy, drop-offs open no pickup window).", Security: needsAppKey})
	put = op(huma.Operation{OperationID: "set-pickup-policy" + suffix, Method: http.MethodPut, Path: path, Tags: tags,
		Summary: "Set " + what + " pickup policy",
		Description: "Needs an organization admin key. Applies to drop-offs from now on; running windows keep theirs unless " +
			"apply_to_open_windows. A location's policy wins over the organization's for drop-offs at that location.",
		Security: needsAppKey})
	del = op(huma.Operation{OperationID: "delete-pickup-policy" + suffix, Method: http.MethodDelete, Path: path, Tags: tags,
		Summary:     "Remove " + what + " pickup policy",
		Description: "Needs an organization admin key. Running windows keep their policy.", DefaultStatus: http.StatusNoContent,
		Security: needsAppKey})
	return get, put, del
}

// getPickupPolicy answers the policy of the organization (loc nil) or of one of its locations.
func (s *Server) getPickupPolicy(ctx context.Context, loc *int64) (*pickupPolicyOut, error) {
	p, err := s.deps.Store.PickupPolicy(ctx, appKey(ctx).OrganizationID, loc)
	if err != nil {
		return nil, s.appError(ctx, "pickup policy", err)
	}
	return &pickupPolicyOut{Body: pickupPolicyBody(p)}, nil
}

// setPickupPolicy saves a policy; with apply_to_open_windows the windows it re-times have their
// workflows told, in the same transaction.
func (s *Server) setPickupPolicy(ctx context.Context, loc *int64, req PickupPolicyRequest) (*pickupPolicyOut, error) {
	k := appKey(ctx)
	if !k.OrgWide() {
		return nil, s.appError(ctx, "pickup policy", errForbidden("only an organization admin key may set pickup policies"))
	}
	onExpiry := req.OnExpiry
	if onExpiry == "" {
		onExpiry = store.OnExpiryNotify
	}
	p := store.PickupPolicy{OrgID: k.OrganizationID, LocationID: loc, WindowSeconds: req.WindowSeconds,
		ReminderOffsets: req.ReminderOffsetsSeconds, MaxExtensions: req.MaxExtensions, ExtensionSeconds: req.ExtensionSeconds,
		OnExpiry: onExpiry}
	var saved store.PickupPolicy
	var retimed []store.PickupWindow
	err := s.record(ctx, func(tx *store.Store) ([]store.OutboxItem, error) {
		var err error
		if saved, retimed, err = tx.SetPickupPolicy(ctx, p, req.ApplyToOpenWindows); err != nil {
			return nil, err
		}
		items := make([]store.OutboxItem, len(retimed))
		for i, w := range retimed {
			items[i] = outbox.PickupWindowItem(w, true)
		}
		return items, nil
	})
	if err != nil {
		return nil, s.appError(ctx, "pickup policy", err)
	}
	body := pickupPolicyBody(saved)
	if req.ApplyToOpenWindows {
		n := len(retimed)
		body.RetimedWindows = &n
	}
	return &pickupPolicyOut{Body: body}, nil
}

// deletePickupPolicy removes a policy; running windows keep theirs.
func (s *Server) deletePickupPolicy(ctx context.Context, loc *int64) (*struct{}, error) {
	k := appKey(ctx)
	if !k.OrgWide() {
		return nil, s.appError(ctx, "pickup policy", errForbidden("only an organization admin key may remove pickup policies"))
	}
	if err := s.deps.Store.DeletePickupPolicy(ctx, k.OrganizationID, loc); err != nil {
		return nil, s.appError(ctx, "pickup policy", err)
	}
	return &struct{}{}, nil
}

// listPickupWindows lists the windows of the key's scope.
func (s *Server) listPickupWindows(ctx context.Context, in *struct {
	LocationID string `query:"location_id" maxLength:"20" doc:"Optional: one location of the key's scope"`
	Status     string `query:"status" enum:"open,overdue,return_requested,picked_up,returned," doc:"Optional"`
	Overdue    bool   `query:"overdue"`
	Limit      int    `query:"limit" minimum:"0" maximum:"500" doc:"At most this many (default and most 500)"`
}) (*PickupWindowsOut, error) {
	k := appKey(ctx)
	f := store.PickupWindowFilter{OrgID: k.OrganizationID, SubOrgID: k.SubOrganizationID, Status: in.Status, Overdue: in.Overdue, Limit: in.Limit}
	if id := strings.TrimSpace(in.LocationID); id != "" {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || n < 1 {
			return nil, s.appError(ctx, "pickup windows", invalidField("location_id must be a positive integer id", "query.location_id", in.LocationID, "not an id"))
		}
		if err := s.deps.Store.LocationOfOrg(ctx, k.OrganizationID, n); err != nil {
			return nil, s.appError(ctx, "location", err)
		}
		f.LocationID = &n
	}
	ws, err := s.deps.Store.PickupWindows(ctx, f)
	if err != nil {
		return nil, s.appError(ctx, "pickup windows", err)
	}
	out := &PickupWindowsOut{}
	out.Body.Data = make([]AppPickupWindowBody, len(ws))
	for i, w := range ws {
		out.Body.Data[i] = appPickupWindowBody(w)
	}
	return out, nil
}
