package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
)

// FlexID is an integer id that a request may send as a JSON number or a JSON string
// (DESIGN §2: ids are accepted as strings or numbers where the seed shows strings).
type FlexID int64

// UnmarshalJSON accepts 7 and "7".
func (f *FlexID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		b = []byte(strings.TrimSpace(s))
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < 1 {
		return errors.New("expected a positive integer id")
	}
	*f = FlexID(n)
	return nil
}

// MarshalJSON writes the number.
func (f FlexID) MarshalJSON() ([]byte, error) { return []byte(strconv.FormatInt(int64(f), 10)), nil }

// Schema documents both accepted forms.
func (FlexID) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{AnyOf: []*huma.Schema{
		{Type: "integer", Format: "int64", Minimum: ptrFloat(1)},
		{Type: "string", Pattern: "^[1-9][0-9]*$"},
	}, Description: "An id, as a number or a string of digits"}
}

func ptrFloat(f float64) *float64 { return &f }

// OptFlexID is an optional FlexID: absent, null and "" all mean "not set".
type OptFlexID struct {
	ID  int64
	Set bool
}

// UnmarshalJSON accepts null, "", a number or a string of digits.
func (o *OptFlexID) UnmarshalJSON(b []byte) error {
	t := bytes.TrimSpace(b)
	if bytes.Equal(t, []byte("null")) || bytes.Equal(t, []byte(`""`)) {
		*o = OptFlexID{}
		return nil
	}
	var f FlexID
	if err := f.UnmarshalJSON(t); err != nil {
		return err
	}
	*o = OptFlexID{ID: int64(f), Set: true}
	return nil
}

// MarshalJSON writes the id or null.
func (o OptFlexID) MarshalJSON() ([]byte, error) {
	if !o.Set {
		return []byte("null"), nil
	}
	return FlexID(o.ID).MarshalJSON()
}

// Schema documents the accepted forms.
func (OptFlexID) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{AnyOf: []*huma.Schema{
		{Type: "integer", Format: "int64", Minimum: ptrFloat(1)},
		{Type: "string", Pattern: "^([1-9][0-9]*)?$"},
		{Type: "null"},
	}, Description: "An id as a number or a string of digits; empty or null for none"}
}
