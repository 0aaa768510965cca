package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Layout is the physical installation a gateway drives: locker types, bank
// types, and banks of lockers, each bank wired to one lock controller. It is
// configuration (a preset or a JSON file), not state: the gateway's database only
// holds what changes (transactions, service states, logs).
type Layout struct {
	// GatewayID is the serial the layout was made for; Config.GatewayID wins.
	GatewayID   string           `json:"gatewayId,omitempty"`
	LockerTypes []LockerTypeSpec `json:"lockerTypes"`
	BankTypes   []BankTypeSpec   `json:"bankTypes"`
	Banks       []BankSpec       `json:"banks"`
}

// LockerTypeSpec is one locker size.
type LockerTypeSpec struct {
	ID          int     `json:"id"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
	WidthMm     int     `json:"widthMm"`
	HeightMm    int     `json:"heightMm"`
	DepthMm     int     `json:"depthMm"`
}

// BankTypeSpec is one model of locker bank (column).
type BankTypeSpec struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

// BankSpec is one installed bank: a column of lockers on one lock controller.
type BankSpec struct {
	ID         int            `json:"id"`
	BankTypeID int            `json:"bankTypeId"`
	Controller ControllerSpec `json:"controller"`
	Lockers    []LockerSpec   `json:"lockers"`
}

// ControllerSpec says how the gateway reaches a bank's lock controller.
type ControllerSpec struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Address string `json:"address"`
}

// LockerSpec is one locker: its id and door label, the controller channel
// wired to its lock, its type, and whether it is reachable from a wheelchair.
type LockerSpec struct {
	LockerID     int    `json:"lockerId"`
	Name         string `json:"name"`
	Channel      int    `json:"channel"`
	LockerTypeID int    `json:"lockerTypeId"`
	IsLowLocker  bool   `json:"isLowLocker"`
}

// Preset names.
const (
	PresetTwoBanks = "two-banks"
	PresetOneBank  = "one-bank"
)

// PresetNames lists the built-in layouts.
func PresetNames() []string { return []string{PresetOneBank, PresetTwoBanks} }

// Preset returns a built-in layout:
//
//   - "two-banks" (GW-0001): lockers 101–116. Bank 1 (bank type 1, controller
//     CTL-1): A01–A08 on channels 1–8 = small ×3, medium ×3, large ×2. Bank 2
//     (bank type 2, controller CTL-2): B01–B08 = small ×4, medium ×4.
//   - "one-bank" (GW-0002): lockers 201–208 named "1"–"8" in bank 1 (bank type
//     1, controller CTL-1), sized like bank 1 above.
//
// Locker types: 1 small, 2 medium, 3 large. Bank types: 1 "Parcel column S/M/L",
// 2 "Parcel column S/M". The bottom two lockers of a column (channels 7, 8) and
// the lowest medium of bank type 1 (channel 6) are isLowLocker.
func Preset(name string) (Layout, error) {
	switch name {
	case PresetTwoBanks:
		return Layout{
			GatewayID:   "GW-0001",
			LockerTypes: presetLockerTypes(),
			BankTypes:   presetBankTypes(),
			Banks: []BankSpec{
				presetBank(1, 1, "CTL-1", 101, func(ch int) string { return fmt.Sprintf("A%02d", ch) }),
				presetBank(2, 2, "CTL-2", 109, func(ch int) string { return fmt.Sprintf("B%02d", ch) }),
			},
		}, nil
	case PresetOneBank:
		return Layout{
			GatewayID:   "GW-0002",
			LockerTypes: presetLockerTypes(),
			BankTypes:   presetBankTypes(),
			Banks: []BankSpec{
				presetBank(1, 1, "CTL-1", 201, func(ch int) string { return fmt.Sprintf("%d", ch) }),
			},
		}, nil
	}
	return Layout{}, fmt.Errorf("unknown layout preset %q (known: %s)", name, strings.Join(PresetNames(), ", "))
}

func presetLockerTypes() []LockerTypeSpec {
	desc := func(s string) *string { return &s }
	return []LockerTypeSpec{
		{ID: 1, Name: "small", Description: desc("Letters and small parcels"), WidthMm: 400, HeightMm: 100, DepthMm: 500},
		{ID: 2, Name: "medium", Description: desc("Shoe boxes and mid-size parcels"), WidthMm: 400, HeightMm: 250, DepthMm: 500},
		{ID: 3, Name: "large", Description: desc("Large parcels"), WidthMm: 400, HeightMm: 450, DepthMm: 500},
	}
}

func presetBankTypes() []BankTypeSpec {
	return []BankTypeSpec{
		{ID: 1, Name: "Parcel column S/M/L"},
		{ID: 2, Name: "Parcel column S/M"},
	}
}

func presetBank(id, bankTypeID int, controllerID string, firstLockerID int, name func(ch int) string) BankSpec {
	types := map[int][]int{
		1: {1, 1, 1, 2, 2, 2, 3, 3}, // S/M/L
		2: {1, 1, 1, 1, 2, 2, 2, 2}, // S/M
	}[bankTypeID]
	b := BankSpec{
		ID:         id,
		BankTypeID: bankTypeID,
		Controller: ControllerSpec{ID: controllerID, Kind: "simulated", Address: "sim://" + strings.ToLower(controllerID)},
	}
	for ch := 1; ch <= 8; ch++ {
		b.Lockers = append(b.Lockers, LockerSpec{
			LockerID:     firstLockerID + ch - 1,
			Name:         name(ch),
			Channel:      ch,
			LockerTypeID: types[ch-1],
			IsLowLocker:  ch >= 7 || (bankTypeID == 1 && ch == 6),
		})
	}
	return b
}

// LoadLayout returns the preset of that name, or else reads the JSON file at
// that path.
func LoadLayout(presetOrPath string) (Layout, error) {
	if l, err := Preset(presetOrPath); err == nil {
		return l, nil
	}
	data, err := os.ReadFile(presetOrPath)
	if err != nil {
		return Layout{}, fmt.Errorf("load layout %q: not a preset (%s) and %w", presetOrPath, strings.Join(PresetNames(), ", "), err)
	}
	var l Layout
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Layout{}, fmt.Errorf("parse layout %q: %w", presetOrPath, err)
	}
	if err := l.Validate(); err != nil {
		return Layout{}, fmt.Errorf("check layout %q: %w", presetOrPath, err)
	}
	return l, nil
}

// Validate checks that ids are unique and positive, that every reference
// resolves, that locker names are unique within the gateway and channels
// unique within a bank.
func (l Layout) Validate() error {
	var errs []error
	lockerTypes := map[int]bool{}
	for _, t := range l.LockerTypes {
		if t.ID <= 0 || lockerTypes[t.ID] {
			errs = append(errs, fmt.Errorf("locker type id %d is not positive or not unique", t.ID))
		}
		if t.Name == "" {
			errs = append(errs, fmt.Errorf("locker type %d has no name", t.ID))
		}
		lockerTypes[t.ID] = true
	}
	bankTypes := map[int]bool{}
	for _, t := range l.BankTypes {
		if t.ID <= 0 || bankTypes[t.ID] {
			errs = append(errs, fmt.Errorf("bank type id %d is not positive or not unique", t.ID))
		}
		bankTypes[t.ID] = true
	}
	if len(l.Banks) == 0 {
		errs = append(errs, errors.New("layout has no banks"))
	}
	banks, controllers, lockerIDs, names := map[int]bool{}, map[string]bool{}, map[int]bool{}, map[string]bool{}
	for _, b := range l.Banks {
		if b.ID <= 0 || banks[b.ID] {
			errs = append(errs, fmt.Errorf("bank id %d is not positive or not unique", b.ID))
		}
		banks[b.ID] = true
		if !bankTypes[b.BankTypeID] {
			errs = append(errs, fmt.Errorf("bank %d: unknown bank type %d", b.ID, b.BankTypeID))
		}
		if b.Controller.ID == "" || controllers[b.Controller.ID] {
			errs = append(errs, fmt.Errorf("bank %d: controller id %q is empty or not unique", b.ID, b.Controller.ID))
		}
		controllers[b.Controller.ID] = true
		channels := map[int]bool{}
		for _, lk := range b.Lockers {
			if lk.LockerID <= 0 || lockerIDs[lk.LockerID] {
				errs = append(errs, fmt.Errorf("locker id %d is not positive or not unique", lk.LockerID))
			}
			lockerIDs[lk.LockerID] = true
			if lk.Name == "" || names[lk.Name] {
				errs = append(errs, fmt.Errorf("locker %d: name %q is empty or not unique", lk.LockerID, lk.Name))
			}
			names[lk.Name] = true
			if lk.Channel <= 0 || channels[lk.Channel] {
				errs = append(errs, fmt.Errorf("locker %d: channel %d is not positive or not unique in bank %d", lk.LockerID, lk.Channel, b.ID))
			}
			channels[lk.Channel] = true
			if !lockerTypes[lk.LockerTypeID] {
				errs = append(errs, fmt.Errorf("locker %d: unknown locker type %d", lk.LockerID, lk.LockerTypeID))
			}
		}
	}
	return errors.Join(errs...)
}

// Wiring returns, per controller id, the channel → locker id map of the layout
// (what a simulator needs to count actuations per locker).
func (l Layout) Wiring() map[string]map[int]int {
	out := make(map[string]map[int]int, len(l.Banks))
	for _, b := range l.Banks {
		m := make(map[int]int, len(b.Lockers))
		for _, lk := range b.Lockers {
			m[lk.Channel] = lk.LockerID
		}
		out[b.Controller.ID] = m
	}
	return out
}

// LockerIDs returns every locker id of the layout in ascending order.
func (l Layout) LockerIDs() []int {
	var ids []int
	for _, b := range l.Banks {
		for _, lk := range b.Lockers {
			ids = append(ids, lk.LockerID)
		}
	}
	sort.Ints(ids)
	return ids
}
