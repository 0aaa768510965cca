package gateway

import (
	"net/http"
	"sort"
	"strconv"

	"github.com/go-chi/chi/v5"
)

func (s *Server) lockerType(id int) *LockerTypeSpec {
	for i := range s.cfg.Layout.LockerTypes {
		if s.cfg.Layout.LockerTypes[i].ID == id {
			return &s.cfg.Layout.LockerTypes[i]
		}
	}
	return nil
}

func (s *Server) bankType(id int) *BankTypeSpec {
	for i := range s.cfg.Layout.BankTypes {
		if s.cfg.Layout.BankTypes[i].ID == id {
			return &s.cfg.Layout.BankTypes[i]
		}
	}
	return nil
}

func (s *Server) listLockerTypes(w http.ResponseWriter, _ *http.Request) error {
	out := make([]LockerTypeSummary, 0, len(s.cfg.Layout.LockerTypes))
	for _, t := range s.cfg.Layout.LockerTypes {
		out = append(out, LockerTypeSummary{ID: t.ID, Name: t.Name})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getLockerType(w http.ResponseWriter, r *http.Request) error {
	raw := chi.URLParam(r, "id")
	id, err := strconv.Atoi(raw)
	t := s.lockerType(id)
	if err != nil || t == nil {
		return newAPIError(CodeLockerTypeNotFound, "no locker type with that id", map[string]any{"id": raw})
	}
	count := 0
	for _, lk := range s.lockers {
		if lk.LockerTypeID == id {
			count++
		}
	}
	writeJSON(w, http.StatusOK, LockerType{
		ID: t.ID, Name: t.Name, Description: t.Description,
		WidthMm: t.WidthMm, HeightMm: t.HeightMm, DepthMm: t.DepthMm, LockerCount: count,
	})
	return nil
}

// bankTypeCounts counts, for one bank type, its lockers by locker type.
func (s *Server) bankTypeCounts(id int) (total int, byLockerType map[int]int) {
	byLockerType = map[int]int{}
	for _, b := range s.cfg.Layout.Banks {
		if b.BankTypeID != id {
			continue
		}
		for _, lk := range b.Lockers {
			total++
			byLockerType[lk.LockerTypeID]++
		}
	}
	return total, byLockerType
}

func (s *Server) listBankTypes(w http.ResponseWriter, _ *http.Request) error {
	out := make([]BankType, 0, len(s.cfg.Layout.BankTypes))
	for _, t := range s.cfg.Layout.BankTypes {
		total, _ := s.bankTypeCounts(t.ID)
		out = append(out, BankType{ID: t.ID, Name: t.Name, LockerCount: total})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getBankType(w http.ResponseWriter, r *http.Request) error {
	raw := chi.URLParam(r, "id")
	id, err := strconv.Atoi(raw)
	t := s.bankType(id)
	if err != nil || t == nil {
		return newAPIError(CodeBankTypeNotFound, "no bank type with that id", map[string]any{"id": raw})
	}
	total, counts := s.bankTypeCounts(id)
	out := BankTypeWithAssociations{ID: t.ID, Name: t.Name, LockerCount: total, Associations: []BankTypeAssociation{}}
	for lt, n := range counts {
		out.Associations = append(out.Associations, BankTypeAssociation{LockerTypeID: lt, Count: n})
	}
	sort.Slice(out.Associations, func(i, j int) bool { return out.Associations[i].LockerTypeID < out.Associations[j].LockerTypeID })
	writeJSON(w, http.StatusOK, out)
	return nil
}
