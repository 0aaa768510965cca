package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
)

// lockerViews builds the Locker of every locker in layout order. With refresh,
// the door sensors are read first (within the sensor timeout).
func (s *Server) lockerViews(ctx context.Context, refresh bool) ([]Locker, error) {
	if refresh {
		s.hw.refreshDoors(ctx)
	}
	states, err := s.store.lockerStates(ctx)
	if err != nil {
		return nil, err
	}
	txs, err := s.store.activeTransactions(ctx)
	if err != nil {
		return nil, err
	}
	held := make(map[int]string, len(txs))
	for _, t := range txs {
		held[t.LockerID] = t.ID
	}
	out := make([]Locker, 0, len(s.order))
	for _, id := range s.order {
		lk := s.lockers[id]
		b := s.hw.byCtl[lk.Controller]
		st := states[id]
		v := Locker{
			LockerID:     id,
			Name:         lk.Name,
			BankID:       lk.BankID,
			LockerTypeID: lk.LockerTypeID,
			IsLowLocker:  lk.IsLowLocker,
			OutOfService: st.OutOfService,
			Operational:  b.isOnline(),
			DoorOpen:     b.door(lk.Channel).Open,
			ReasonCode:   st.ReasonCode,
			Reason:       st.Reason,
		}
		if txID, ok := held[id]; ok {
			v.TransactionID = &txID
		}
		v.Available = v.Operational && !v.OutOfService && v.TransactionID == nil
		out = append(out, v)
	}
	return out, nil
}

// pathLocker resolves {lockerId}; anything that is not a locker of this
// gateway is 404.
func (s *Server) pathLocker(r *http.Request) (lockerInfo, error) {
	raw := chi.URLParam(r, "lockerId")
	id, err := strconv.Atoi(raw)
	lk, ok := s.lockers[id]
	if err != nil || !ok {
		return lockerInfo{}, newAPIError(CodeLockerNotFound, "no locker with that id",
			map[string]any{"lockerId": raw})
	}
	return lk, nil
}

func (s *Server) listLockers(w http.ResponseWriter, r *http.Request) error {
	views, err := s.lockerViews(r.Context(), true)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, views)
	return nil
}

func (s *Server) getLocker(w http.ResponseWriter, r *http.Request) error {
	lk, err := s.pathLocker(r)
	if err != nil {
		return err
	}
	v, err := s.lockerView(r.Context(), lk.LockerID, true)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) lockerView(ctx context.Context, id int, refresh bool) (Locker, error) {
	views, err := s.lockerViews(ctx, refresh)
	if err != nil {
		return Locker{}, err
	}
	for _, v := range views {
		if v.LockerID == id {
			return v, nil
		}
	}
	return Locker{}, fmt.Errorf("locker %d missing from its own layout", id)
}

func (s *Server) controllerViews(ctx context.Context) []LockController {
	statuses := s.hw.status(ctx)
	out := make([]LockController, 0, len(statuses))
	for _, st := range statuses {
		spec := st.bank.spec
		out = append(out, LockController{
			ID:              spec.Controller.ID,
			Kind:            spec.Controller.Kind,
			Address:         spec.Controller.Address,
			Online:          st.online,
			LockerCount:     len(spec.Lockers),
			FirmwareVersion: st.firmware,
		})
	}
	return out
}

func (s *Server) lockerConfig(w http.ResponseWriter, r *http.Request) error {
	ctls := s.controllerViews(r.Context())
	cfg := LockerConfig{GatewayID: s.cfg.GatewayID, Banks: make([]BankConfig, 0, len(s.cfg.Layout.Banks))}
	for i, b := range s.cfg.Layout.Banks {
		bc := BankConfig{ID: b.ID, BankTypeID: b.BankTypeID, Controller: ctls[i], Lockers: make([]BankLocker, 0, len(b.Lockers))}
		for _, lk := range b.Lockers {
			bc.Lockers = append(bc.Lockers, BankLocker{LockerID: lk.LockerID, Name: lk.Name, Channel: lk.Channel, LockerTypeID: lk.LockerTypeID})
		}
		cfg.Banks = append(cfg.Banks, bc)
	}
	writeJSON(w, http.StatusOK, cfg)
	return nil
}

type patchLockerRequest struct {
	OutOfService *bool   `json:"outOfService"`
	ReasonCode   *string `json:"reasonCode"`
	Reason       *string `json:"reason"`
}

func (s *Server) patchLocker(w http.ResponseWriter, r *http.Request) error {
	lk, err := s.pathLocker(r)
	if err != nil {
		return err
	}
	var body patchLockerRequest
	if err := decodeJSON(w, r, &body, false); err != nil {
		return err
	}
	if body.OutOfService == nil {
		return validationError("outOfService", "is required (true or false)")
	}
	if body.ReasonCode != nil && (len(*body.ReasonCode) > 64) {
		return validationError("reasonCode", "must be at most 64 characters")
	}
	if body.Reason != nil && len(*body.Reason) > 500 {
		return validationError("reason", "must be at most 500 characters")
	}
	msg, err := s.setService(r.Context(), lk, *body.OutOfService, body.ReasonCode, body.Reason, "api")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, LockerOperationResponse{
		Success: true, LockerID: lk.LockerID, DoorOpen: s.hw.byCtl[lk.Controller].door(lk.Channel).Open, Message: msg,
	})
	return nil
}

// setService changes a locker's service state and records it; returning to
// service clears the reason.
func (s *Server) setService(ctx context.Context, lk lockerInfo, outOfService bool, reasonCode, reason *string, via string) (string, error) {
	st := lockerState{OutOfService: outOfService}
	if outOfService {
		st.ReasonCode, st.Reason = emptyToNil(reasonCode), emptyToNil(reason)
	}
	if err := s.store.setLockerState(ctx, lk.LockerID, st, time.Now()); err != nil {
		return "", err
	}
	fields := map[string]any{"lockerId": lk.LockerID, "name": lk.Name, "via": via}
	msg := "locker returned to service"
	if outOfService {
		msg = "locker set out of service"
		if st.ReasonCode != nil {
			fields["reasonCode"] = *st.ReasonCode
		}
		if st.Reason != nil {
			fields["reason"] = *st.Reason
		}
	}
	s.event(ctx, slog.LevelInfo, msg, fields)
	return msg, nil
}

func emptyToNil(p *string) *string {
	if p == nil || *p == "" {
		return nil
	}
	return p
}

func (s *Server) openLocker(w http.ResponseWriter, r *http.Request) error {
	lk, err := s.pathLocker(r)
	if err != nil {
		return err
	}
	if _, err := s.openAndRecord(r.Context(), lk, "maintenance", nil); err != nil {
		return err
	}
	writeOpened(w, lk)
	return nil
}

// openAll opens every locker (maintenance). Banks run concurrently, lockers
// within a bank one after another; once a bank's controller is found
// unavailable, its remaining lockers are reported unavailable without being
// tried again, so a dead controller costs one open policy, not eight.
func (s *Server) openAll(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	results := make(map[int]OperationResult, len(s.lockers))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, b := range s.cfg.Layout.Banks {
		wg.Go(func() {
			var down *apiError
			for _, spec := range b.Lockers {
				lk := s.lockers[spec.LockerID]
				res := OperationResult{LockerID: lk.LockerID, Status: http.StatusOK, Success: true, Message: "locker opened"}
				var err error
				if down != nil {
					err = down
				} else {
					_, err = s.openAndRecord(ctx, lk, "open-all", nil)
				}
				var ae *apiError
				if errors.As(err, &ae) {
					res = OperationResult{LockerID: lk.LockerID, Status: ae.status(), Success: false, Message: ae.message, Error: ae.code}
					if ae.code == CodeControllerUnavailable {
						down = newAPIError(ae.code, "not tried: the bank's lock controller is unavailable", nil)
					}
				}
				mu.Lock()
				results[lk.LockerID] = res
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	resp := OpenAllLockersResponse{Results: make([]OperationResult, 0, len(results))}
	for _, id := range s.order {
		res := results[id]
		if res.Success {
			resp.SuccessCount++
		} else {
			resp.FailureCount++
		}
		resp.Results = append(resp.Results, res)
	}
	s.event(ctx, slog.LevelInfo, "open-all finished", map[string]any{"successCount": resp.SuccessCount, "failureCount": resp.FailureCount})
	writeJSON(w, http.StatusMultiStatus, resp)
	return nil
}
