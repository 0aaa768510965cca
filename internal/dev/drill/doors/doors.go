// Package doors counts door actuations against the open requests that asked for them: the
// fault drills' test of "no door opened twice". Each open of a drill has a locker of its
// own, so a locker that moved more than once, or moved although nobody asked, is a
// duplicate, whatever the requests' answers were.
package doors

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
)

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

// Reported is what a request's final poll said of it (DESIGN §6.2): its X-Request-State, its
// HTTP status and, in the error body of a state other than completed, details.outcome.
type Reported struct {
	State  string
	Status int
	// OutcomeUnknown: the error body's details.outcome is "unknown".
	OutcomeUnknown bool
}

// ReportedOf reads a final poll's state, status and body.
func ReportedOf(state string, status int, body []byte) Reported {
	var e struct {
		Details struct {
			Outcome string `json:"outcome"`
		} `json:"details"`
	}
	_ = json.Unmarshal(body, &e)
	return Reported{State: state, Status: status, OutcomeUnknown: e.Details.Outcome == "unknown"}
}

// statusOf is the HTTP status each terminal state other than completed answers with.
var statusOf = map[string]int{"rejected": 502, "dispatch_failed": 503, "gateway_unresponsive": 504}

// Disagreement says how a request's reported outcome disagrees with its door, which moved
// `moved` times since the request was made; "" when they agree. The rule (DESIGN §6.2, "an
// outcome that is unknown is never rejected"): completed ⇒ the door moved exactly once;
// rejected or dispatch_failed ⇒ it did not move; gateway_unresponsive ⇒ at most once, and
// only with details.outcome "unknown". The HTTP status must be the state's (502, 503, 504; a
// completed request answers the gateway's own status, never one of those), and only
// gateway_unresponsive may say the outcome is unknown. A request with no terminal state is
// lost, not a disagreement: the caller counts it apart.
func Disagreement(rep Reported, moved int) string {
	if want, ok := statusOf[rep.State]; ok && rep.Status != want {
		return fmt.Sprintf("%s answered HTTP %d (want %d)", rep.State, rep.Status, want)
	}
	switch rep.State {
	case "completed":
		if rep.Status >= 500 {
			return fmt.Sprintf("completed answered HTTP %d", rep.Status)
		}
		if moved != 1 {
			return "completed, but the door " + moves(moved)
		}
	case "rejected", "dispatch_failed":
		if rep.OutcomeUnknown {
			return rep.State + " with details.outcome unknown"
		}
		if moved != 0 {
			return rep.State + ", but the door " + moves(moved)
		}
	case "gateway_unresponsive":
		if !rep.OutcomeUnknown {
			return "gateway_unresponsive without details.outcome unknown"
		}
		if moved > 1 {
			return "gateway_unresponsive, but the door " + moves(moved)
		}
	}
	return ""
}

func moves(n int) string {
	switch n {
	case 0:
		return "did not move"
	case 1:
		return "moved once"
	}
	return fmt.Sprintf("moved %d times", n)
}

// Ledger counts door actuations since a baseline across restarts of the gateways'
// processes: a simulated gateway counts its doors in its own memory, so a new process of it
// counts from zero, and what the one before it counted is kept here.
type Ledger struct {
	base  Actuations // the running process's counts at the baseline (none once restarted)
	ended Actuations // actuations since the baseline counted by processes that have ended
}

// NewLedger starts a ledger at the gateways' counts now.
func NewLedger(baseline Actuations) *Ledger {
	return &Ledger{base: baseline, ended: Actuations{}}
}

// Ended records the last counts of gateway serial's process, which has ended; its next
// process counts from zero.
func (l *Ledger) Ended(serial string, last map[int]int) {
	if l.ended[serial] == nil {
		l.ended[serial] = map[int]int{}
	}
	for id, n := range last {
		if d := n - l.base[serial][id]; d > 0 {
			l.ended[serial][id] += d
		}
	}
	l.base[serial] = nil
}

// Moved is the actuations since the baseline, given the counts of the running processes now.
func (l *Ledger) Moved(now Actuations) Actuations {
	out := Actuations{}
	add := func(serial string, id, n int) {
		if n <= 0 {
			return
		}
		if out[serial] == nil {
			out[serial] = map[int]int{}
		}
		out[serial][id] += n
	}
	for serial, m := range now {
		for id, n := range m {
			add(serial, id, n-l.base[serial][id])
		}
	}
	for serial, m := range l.ended {
		for id, n := range m {
			add(serial, id, n)
		}
	}
	return out
}

// doorOpenedLine matches a gateway's "door opened" event-log line, in its JSON and its text
// log format, and the locker it names.
var (
	doorOpenedLine = regexp.MustCompile(`"msg":"door opened"|msg="door opened"`)
	lockerIDField  = regexp.MustCompile(`"?lockerId"?[:=](\d+)`)
)

// Logged counts the "door opened" lines of a gateway's log per locker id: the gateway writes
// one after each actuation, before it records the open's result and answers. It is the
// gateway's own account, not the door's; a drill takes it for a door whose process ended
// before the simulator's counters could be read after its last actuation.
func Logged(r io.Reader) (map[int]int, error) {
	out := map[int]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !doorOpenedLine.MatchString(line) {
			continue
		}
		if m := lockerIDField.FindStringSubmatch(line); m != nil {
			id, err := strconv.Atoi(m[1])
			if err == nil {
				out[id]++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read a gateway's log: %w", err)
	}
	return out, nil
}
