package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
)

// transactionIDPattern keeps ids safe in a URL path segment and in logs.
var transactionIDPattern = regexp.MustCompile(`^[A-Za-z0-9._~:@-]{1,128}$`)

func toTransactionResponse(t transaction) TransactionResponse {
	return TransactionResponse{TransactionID: t.ID, LockerID: t.LockerID, CreatedAt: formatTime(t.CreatedAt)}
}

func (s *Server) listTransactions(w http.ResponseWriter, r *http.Request) error {
	txs, err := s.store.activeTransactions(r.Context())
	if err != nil {
		return err
	}
	out := make([]TransactionResponse, 0, len(txs))
	for _, t := range txs {
		out = append(out, toTransactionResponse(t))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type createTransactionRequest struct {
	TransactionID    json.RawMessage `json:"transactionId"`
	LockerID         json.RawMessage `json:"lockerId"`
	LockerTypeID     json.RawMessage `json:"lockerTypeId"`
	BankTypeID       json.RawMessage `json:"bankTypeId"`
	RequireLowLocker *bool           `json:"requireLowLocker"`
}

func (s *Server) createTransaction(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	var body createTransactionRequest
	if err := decodeJSON(w, r, &body, true); err != nil {
		return err
	}
	txID, err := parseTransactionID(body.TransactionID)
	if err != nil {
		return err
	}
	req := assignRequest{TransactionID: txID, RequireLowLocker: body.RequireLowLocker != nil && *body.RequireLowLocker}
	if req.LockerTypeID, err = parseOptionalID("lockerTypeId", body.LockerTypeID); err != nil {
		return err
	}
	if req.LockerTypeID != nil && s.lockerType(*req.LockerTypeID) == nil {
		return validationError("lockerTypeId", fmt.Sprintf("no locker type %d at this gateway", *req.LockerTypeID))
	}
	if req.BankTypeID, err = parseOptionalID("bankTypeId", body.BankTypeID); err != nil {
		return err
	}
	if req.BankTypeID != nil && s.bankType(*req.BankTypeID) == nil {
		return validationError("bankTypeId", fmt.Sprintf("no bank type %d at this gateway", *req.BankTypeID))
	}
	if req.LockerID, err = parseOptionalID("lockerId", body.LockerID); err != nil {
		return err
	}
	if req.LockerID != nil {
		if _, ok := s.lockers[*req.LockerID]; !ok {
			return newAPIError(CodeLockerNotFound, fmt.Sprintf("no locker %d at this gateway", *req.LockerID),
				map[string]any{"lockerId": *req.LockerID})
		}
	}
	req.Candidates = s.candidates(req)

	var t transaction
	for try := 0; try < 2; try++ {
		t, err = s.store.assign(ctx, req, time.Now())
		if !isBusy(err) {
			break
		}
	}
	var exists *transactionExistsError
	switch {
	case errors.As(err, &exists):
		tr := toTransactionResponse(exists.existing)
		details := map[string]any{"transactionId": tr.TransactionID, "lockerId": tr.LockerID, "createdAt": tr.CreatedAt,
			"released": exists.existing.ReleasedAt != nil}
		return &apiError{code: CodeTransactionExists, body: TransactionConflict{
			Error:               errorBody(CodeTransactionExists, fmt.Sprintf("transaction %q already exists", txID), details),
			TransactionResponse: tr,
		}}
	case errors.Is(err, errNoLocker):
		return newAPIError(CodeNoAvailableLockers, "no free locker matches the request", criteria(req))
	case isBusy(err):
		return newAPIError(CodeLockerAssignmentConflict,
			"another request took the locker at the same time; try again", criteria(req))
	case err != nil:
		return fmt.Errorf("create transaction: %w", err)
	}
	s.event(ctx, slog.LevelInfo, "transaction created", map[string]any{"transactionId": t.ID, "lockerId": t.LockerID})
	w.Header().Set("Location", "/transactions/"+t.ID)
	writeJSON(w, http.StatusCreated, toTransactionResponse(t))
	return nil
}

func criteria(req assignRequest) map[string]any {
	d := map[string]any{"requireLowLocker": req.RequireLowLocker}
	if req.LockerID != nil {
		d["lockerId"] = *req.LockerID
	}
	if req.LockerTypeID != nil {
		d["lockerTypeId"] = *req.LockerTypeID
	}
	if req.BankTypeID != nil {
		d["bankTypeId"] = *req.BankTypeID
	}
	return d
}

// candidates lists the lockers matching a request in order of preference:
// lockers on a controller known to be offline are left out; when a low locker
// is not required, the others come first, so low lockers stay free for those
// who need them.
func (s *Server) candidates(req assignRequest) []int {
	var high, low []int
	for _, id := range s.order {
		lk := s.lockers[id]
		if req.LockerID != nil && id != *req.LockerID {
			continue
		}
		if req.LockerTypeID != nil && lk.LockerTypeID != *req.LockerTypeID {
			continue
		}
		if req.BankTypeID != nil && lk.BankTypeID != *req.BankTypeID {
			continue
		}
		if req.RequireLowLocker && !lk.IsLowLocker {
			continue
		}
		if !s.hw.byCtl[lk.Controller].isOnline() {
			continue
		}
		if lk.IsLowLocker {
			low = append(low, id)
		} else {
			high = append(high, id)
		}
	}
	return append(high, low...)
}

// parseTransactionID accepts a string or an integer; absent means "make one".
func parseTransactionID(raw json.RawMessage) (string, error) {
	if !rawPresent(raw) {
		return uuid.NewString(), nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		if !transactionIDPattern.MatchString(str) {
			return "", validationError("transactionId", "must be 1 to 128 characters of A-Z a-z 0-9 . _ ~ : @ -")
		}
		return str, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil {
		if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil && i >= 0 {
			return strconv.FormatInt(i, 10), nil
		}
	}
	return "", validationError("transactionId", "must be a string or a non-negative integer")
}

// parseOptionalID accepts a positive integer as a JSON number or a numeric
// string; absent or null is nil.
func parseOptionalID(field string, raw json.RawMessage) (*int, error) {
	if !rawPresent(raw) {
		return nil, nil
	}
	text := string(raw)
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		text = strings.TrimSpace(str)
	}
	id, err := strconv.Atoi(text)
	if err != nil || id <= 0 {
		return nil, validationError(field, "must be a positive integer")
	}
	return &id, nil
}

// activeTransaction loads the transaction named in the path, if active.
func (s *Server) activeTransaction(r *http.Request) (transaction, error) {
	id := chi.URLParam(r, "transactionId")
	notFound := newAPIError(CodeTransactionNotFound,
		"no active transaction with that id", map[string]any{"transactionId": id})
	if !transactionIDPattern.MatchString(id) {
		return transaction{}, notFound
	}
	t, err := s.store.transaction(r.Context(), id)
	switch {
	case errors.Is(err, errNotFound):
		return transaction{}, notFound
	case err != nil:
		return transaction{}, err
	case t.ReleasedAt != nil:
		return transaction{}, notFound
	}
	return t, nil
}

func (s *Server) getTransaction(w http.ResponseWriter, r *http.Request) error {
	t, err := s.activeTransaction(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toTransactionResponse(t))
	return nil
}

func (s *Server) releaseTransaction(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "transactionId")
	if !transactionIDPattern.MatchString(id) {
		return newAPIError(CodeTransactionNotFound, "no active transaction with that id",
			map[string]any{"transactionId": id})
	}
	t, err := s.store.release(r.Context(), id, time.Now())
	switch {
	case errors.Is(err, errNotFound):
		return newAPIError(CodeTransactionNotFound, "no active transaction with that id",
			map[string]any{"transactionId": id})
	case err != nil:
		return err
	}
	s.event(r.Context(), slog.LevelInfo, "transaction released", map[string]any{"transactionId": t.ID, "lockerId": t.LockerID})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) openTransaction(w http.ResponseWriter, r *http.Request) error {
	t, err := s.activeTransaction(r)
	if err != nil {
		return err
	}
	lk, ok := s.lockers[t.LockerID]
	if !ok {
		// The layout changed under an old transaction.
		return newAPIError(CodeLockerNotFound, "the transaction's locker is no longer installed",
			map[string]any{"lockerId": t.LockerID, "transactionId": t.ID})
	}
	states, err := s.store.lockerStates(r.Context())
	if err != nil {
		return err
	}
	if states[lk.LockerID].OutOfService {
		return newAPIError(CodeLockerOutOfService, "the transaction's locker is out of service",
			map[string]any{"lockerId": lk.LockerID, "transactionId": t.ID})
	}
	if _, err := s.openAndRecord(r.Context(), lk, "transaction", map[string]any{"transactionId": t.ID}); err != nil {
		return err
	}
	// Its release is then a pickup, whose door the watch reads for an item left (item_left).
	if err := s.store.markOpened(context.WithoutCancel(r.Context()), t.ID, time.Now()); err != nil {
		s.logger.WarnContext(r.Context(), "mark transaction opened", "transactionId", t.ID, "err", err)
	}
	writeOpened(w, lk)
	return nil
}
