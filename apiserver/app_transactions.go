package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/store"
)

// TransactionBody is a row of the organization transaction list.
type TransactionBody struct {
	ID             uuid.UUID  `json:"id"`
	Type           string     `json:"type" doc:"dropoff, pickup, open, close, or a gateway transaction"`
	OrderReference *string    `json:"order_reference"`
	PickupCode     *string    `json:"pickup_code" doc:"Masked: only the last two digits are shown"`
	LockerNumber   *string    `json:"locker_number"`
	TowerName      *string    `json:"tower_name"`
	Location       *string    `json:"location"`
	City           *string    `json:"city"`
	PinCode        *string    `json:"pin_code" doc:"Postal code of the location"`
	Status         string     `json:"status"`
	CreatedAt      Timestamp  `json:"created_at"`
	CompletedAt    *Timestamp `json:"completed_at" nullable:"true"`
}

// TransactionPage is one page of the list.
type TransactionPage struct {
	Data       []TransactionBody `json:"data"`
	PageNumber int               `json:"page_number"`
	PageSize   int               `json:"page_size"`
	TotalCount int               `json:"total_count"`
	TotalPages int               `json:"total_pages"`
}

// transactionQuery holds the seed's ten query parameters. The seed marks them all required;
// an empty or absent one filters nothing.
type transactionQuery struct {
	Type           string `query:"type" maxLength:"64"`
	OrderReference string `query:"order_reference" maxLength:"256"`
	PickupCode     string `query:"pickup_code" maxLength:"16"`
	LockerNumber   string `query:"locker_number" maxLength:"64"`
	TowerName      string `query:"tower_name" maxLength:"256"`
	Location       string `query:"location" maxLength:"256"`
	City           string `query:"city" maxLength:"256"`
	PinCode        string `query:"pin_code" maxLength:"32"`
	PageSize       string `query:"page_size" maxLength:"8" doc:"1..100, default 20 (numeric text)"`
	PageNumber     string `query:"page_number" maxLength:"12" doc:"From 1, default 1 (numeric text)"`
}

func (s *Server) registerTransactions(api huma.API) {
	huma.Register(api, op(huma.Operation{
		OperationID: "list-organization-transactions", Method: http.MethodGet, Path: "/dropoff/organization/transactions",
		Tags:        []string{"App engine: transactions"},
		Summary:     "List all transactions",
		Description: "Drop-offs and pickups at towers, access-code opens and closes, and gateway transactions of the organization (of the sub-organization, for a sub-organization key), newest first. Empty filters filter nothing. A `pickup_code` filter that matches nothing counts as a wrong code for the key: after 10 such misses within 15 minutes, `pickup_code` filters answer 429 with `Retry-After` until the window passes.",
		Security:    needsAppKey,
	}), s.listTransactions)
}

// listTransactions answers GET /dropoff/organization/transactions.
func (s *Server) listTransactions(ctx context.Context, in *transactionQuery) (*struct{ Body TransactionPage }, error) {
	size, err := pageParam("page_size", in.PageSize, 20, 100)
	if err != nil {
		return nil, s.appError(ctx, "page", err)
	}
	page, err := pageParam("page_number", in.PageNumber, 1, 1<<30)
	if err != nil {
		return nil, s.appError(ctx, "page", err)
	}
	k := appKey(ctx)
	f := store.TransactionFilter{OrgID: k.OrganizationID, SubOrgID: k.SubOrganizationID,
		Type: strings.TrimSpace(in.Type), OrderReference: in.OrderReference, LockerNumber: strings.TrimSpace(in.LockerNumber),
		TowerName: strings.TrimSpace(in.TowerName), Location: strings.TrimSpace(in.Location), City: strings.TrimSpace(in.City),
		PinCode: strings.TrimSpace(in.PinCode)}
	var lookup *store.CodeAttempt
	if c := strings.TrimSpace(in.PickupCode); c != "" {
		// The list shows codes masked; a filter that matched could reveal the rest of one.
		// Misses count against the key like wrong codes at a door do.
		att, err := s.codeLookupAllowed(ctx, k.ID)
		if err != nil {
			return nil, s.appError(ctx, "transactions", err)
		}
		lookup = &att
		f.PickupCodeHash = s.pickupCodeHash(c)
	}
	list, total, err := s.deps.Store.ListTransactions(ctx, f, size, page)
	if lookup != nil && (err != nil || total > 0) {
		// A hit (or no answer) is not a miss: uncount it.
		if rerr := s.deps.Store.ReleaseCodeAttempt(context.WithoutCancel(ctx), lookup.ID); rerr != nil {
			s.logger.WarnContext(ctx, "release pickup_code lookup", "err", rerr)
		}
	}
	if err != nil {
		return nil, s.appError(ctx, "transactions", err)
	}
	return &struct{ Body TransactionPage }{Body: TransactionPage{Data: bodies(list, transactionBody), PageNumber: page, PageSize: size,
		TotalCount: total, TotalPages: (total + size - 1) / size}}, nil
}

// transactionBody is a row of the list, its pickup code masked to its last two digits.
func transactionBody(t store.Transaction) TransactionBody {
	b := TransactionBody{ID: t.ID, Type: t.Type, OrderReference: t.OrderReference, LockerNumber: t.LockerNumber,
		TowerName: t.TowerName, Location: t.Location, City: t.City, PinCode: t.PinCode, Status: t.Status,
		CreatedAt: ts(t.CreatedAt), CompletedAt: optTS(t.CompletedAt)}
	if t.PickupCodeLast2 != nil {
		masked := "****" + *t.PickupCodeLast2
		b.PickupCode = &masked
	}
	return b
}

// pageParam reads a numeric-text paging parameter: empty means the default, anything but
// an integer within [1, max] is 422.
func pageParam(name, v string, def, maxValue int) (int, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxValue {
		return 0, invalidField(name+" must be an integer from 1 to "+strconv.Itoa(maxValue),
			"query."+name, v, "expected an integer from 1 to "+strconv.Itoa(maxValue))
	}
	return n, nil
}

// codeLookupBucket is where the wrong-code limiter counts a key's pickup_code filter misses:
// location ids start at 1, so 0 is never a real location's count.
const codeLookupBucket = 0

// codeLookupAllowed counts a pickup_code lookup as a miss before it runs (released when it
// matched), and refuses (attemptsLimitedError) once the key's lookups have missed CodeGuessLimit times within
// CodeGuessWindow. Without it a key shown a code masked ("****42") could find the other four
// digits in at most 10⁴ filtered lists.
func (s *Server) codeLookupAllowed(ctx context.Context, keyID uuid.UUID) (store.CodeAttempt, error) {
	att, err := s.deps.Store.ClaimCodeAttempt(ctx, keyID, codeLookupBucket, nil,
		store.CodeLimits{Window: CodeGuessWindow, PerEndUser: CodeGuessLimit, Ceiling: CodeGuessLimit})
	if err != nil {
		return store.CodeAttempt{}, err
	}
	if att.Allowed {
		return att, nil
	}
	retry := max(int(time.Until(att.RetryAt).Seconds())+1, 1)
	return store.CodeAttempt{}, &attemptsLimitedError{retryAfter: retry,
		msg: fmt.Sprintf("%d pickup_code filters matched nothing within %s: try again in %d s", att.Count, CodeGuessWindow, retry)}
}
