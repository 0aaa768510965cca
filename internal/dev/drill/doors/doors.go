// Package doors counts door actuations against the open requests that asked for them: the
// fault drills' test of "no door opened twice". Each open of a drill has a locker of its
// own, so a locker that moved more than once, or moved although nobody asked, is a
// duplicate, whatever the requests' answers were.
package doors

import "encoding/json"

// Open is one open request and what its client finally heard.
type Open struct {
	Gateway string
	Locker  int
	// Opened: the terminal answer was completed with success and doorOpen true.
	Opened bool
}

// Actuations are door actuations per gateway serial and locker id (the simulators'
// GET /sim/stats "opens").
type Actuations map[string]map[int]int

// Account is the comparison of actuations with opens.
type Account struct {
	Sent     int // open requests
	Actuated int // their lockers that moved (at least once)
	// Duplicates counts actuations beyond one per open request, plus actuations of
	// lockers no request asked to open.
	Duplicates int
	// FalseOpen counts opens answered "opened" whose door never moved.
	FalseOpen int
	// MovedUnconfirmed counts doors that moved for an open whose answer was not
	// "opened" (allowed for a delivered call without an answer: the door may have moved).
	MovedUnconfirmed int
}

// Count compares the actuations since baseline with the opens.
func Count(now, baseline Actuations, opens []Open) Account {
	var a Account
	asked := map[string]map[int]int{}
	for _, o := range opens {
		if asked[o.Gateway] == nil {
			asked[o.Gateway] = map[int]int{}
		}
		asked[o.Gateway][o.Locker]++
	}
	for _, o := range opens {
		a.Sent++
		n := now[o.Gateway][o.Locker] - baseline[o.Gateway][o.Locker]
		if n >= 1 {
			a.Actuated++
		}
		switch {
		case o.Opened && n == 0:
			a.FalseOpen++
		case !o.Opened && n > 0:
			a.MovedUnconfirmed++
		}
	}
	for serial, lockers := range now {
		for id, n := range lockers {
			moved := n - baseline[serial][id]
			if extra := moved - asked[serial][id]; extra > 0 {
				a.Duplicates += extra
			}
		}
	}
	return a
}

// Opened reports whether a gateway's answer to an open says the door opened.
func Opened(body []byte) bool {
	var b struct {
		Success  bool `json:"success"`
		DoorOpen bool `json:"doorOpen"`
	}
	return json.Unmarshal(body, &b) == nil && b.Success && b.DoorOpen
}
