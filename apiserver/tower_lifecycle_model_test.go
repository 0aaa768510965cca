package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/towerproto"
)

// The model-based test of DESIGN §4.1: a small reference state machine of every locker
// (status, possessor, generation, reservation, tokens; and what the tower has seen) is
// driven by thousands of random operations against the real API, the real workflows and the
// tower simulator. After every step every locker's status, possessor (via assigned-lockers),
// reservation, active tokens and generation are compared with the model.
//
// Time: the model reads the database clock before each step and treats every hold or token
// that expires within ±mUncertain of it as uncertain: no operation touches such a locker or
// token, and the locker is not compared until its expiry is clearly past. A step that stalls
// for longer than that margin (a noisy machine) cannot be judged for the lockers whose expiry
// it crossed: those are re-read from the server and counted as "resynced".
//
// Reproduce a run: LOCKERNET_MODEL_SEED=<seed> go test ./apiserver -run TestLifecycleModel
// (LOCKERNET_MODEL_OPS sets the number of operations, default 2000).

const mUncertain = 2 * time.Second

// Model statuses are the wire ids of DESIGN §4.1.
const (
	mAvailable = iota + 1
	mReserved
	mRented
	mOccupied
	mDeclined
	mOutOfService
)

var mNames = []string{"", "available", "reserved", "rented", "occupied", "declined", "out_of_service"}

type mClient struct {
	id, secret, tok string
	tokAt           time.Time
}

type mReservation struct {
	id      string
	client  int
	locker  *mLocker
	expires time.Time
	state   string // active, consumed, cancelled, expired
}

type mToken struct {
	id, typ       string
	client        int
	gen           uint32
	expires       time.Time
	payload, auth string
	towerUsed     bool // the tower accepted it once
	cloudUsed     bool // the cloud applied a use of it
}

type mLocker struct {
	id        int64
	tower     string
	typeID    int64
	low       bool
	status    int // as the model holds it; a lapsed hold is settled into available
	possessor int // client index, -1 for none
	gen       uint32
	towerGen  uint32 // the highest generation the tower has seen, reached by a bump, or learnt as a floor
	towerOOS  bool   // the service state the tower learnt from the cloud's commands
	hold      time.Time
	res       *mReservation
	kept      bool
	tokens    []*mToken
	// forgotten is set when a read-back dropped the tokens of generation forgottenGen: the
	// server may still list them while that generation lasts, so they are not compared.
	forgotten    bool
	forgottenGen uint32
}

type lockerModel struct {
	t        *testing.T
	e        *testenv.Env
	sim      *towersim.Simulator
	rng      *rand.Rand
	clients  []*mClient
	lockers  []*mLocker
	byID     map[int64]*mLocker
	location int64
	types    []int64
	rsvs     []*mReservation
	pending  map[string][]mPending // uses accepted offline, by tower
	now      time.Time             // the database clock at the start of the step
	counts   map[string]int
	resynced int
	compared int
	skipped  int
	anomaly  int
	step     int
	lastOp   string
}

func (m *lockerModel) count(key string) { m.counts[key]++ }

func (m *lockerModel) dbNow() time.Time {
	m.t.Helper()
	var now time.Time
	require.NoError(m.t, m.e.Store.Pool().QueryRow(context.Background(), `SELECT now()`).Scan(&now))
	return now
}

// token returns the client's bearer, renewed well before its 5 minutes run out.
func (m *lockerModel) token(c int) string {
	cl := m.clients[c]
	if time.Since(cl.tokAt) > 3*time.Minute {
		cl.tok, cl.tokAt = clientToken(m.t, m.e, cl.id, cl.secret), time.Now()
	}
	return cl.tok
}

// held reports whether the status holds until l.hold.
func held(status int) bool {
	return status == mReserved || status == mRented || status == mDeclined
}

// effective is the status a client sees at time at.
func (l *mLocker) effective(at time.Time) int {
	if held(l.status) && !l.hold.After(at) {
		return mAvailable
	}
	return l.status
}

// effectivePossessor is the possessor at time at (a lapsed hold is none).
func (l *mLocker) effectivePossessor(at time.Time) int {
	if l.effective(at) == mAvailable {
		return -1
	}
	return l.possessor
}

func near(x, lo, hi time.Time) bool {
	return !x.Before(lo.Add(-mUncertain)) && !x.After(hi.Add(mUncertain))
}

// uncertain reports whether the locker's hold may run out within [lo, hi] ± the margin.
func (l *mLocker) uncertain(lo, hi time.Time) bool {
	return held(l.status) && near(l.hold, lo, hi)
}

// activeTokens are the tokens assigned-lockers lists: this possession's, unused, unexpired.
func (l *mLocker) activeTokens(at time.Time) []string {
	var ids []string
	for _, tk := range l.tokens {
		if tk.gen == l.gen && !tk.cloudUsed && tk.expires.After(at) {
			ids = append(ids, tk.id)
		}
	}
	slices.Sort(ids)
	return ids
}

func (l *mLocker) tokensUncertain(lo, hi time.Time) bool {
	if l.forgotten && l.forgottenGen == l.gen {
		return true
	}
	for _, tk := range l.tokens {
		if tk.gen == l.gen && !tk.cloudUsed && near(tk.expires, lo, hi) {
			return true
		}
	}
	return false
}

// settle writes lapsed holds that are clearly past into the model, as the read-time rule
// does on the server: the possession ends, the generation stays.
func (m *lockerModel) settle() {
	for _, l := range m.lockers {
		if held(l.status) && l.hold.Before(m.now.Add(-mUncertain)) {
			m.count("expiry:" + mNames[l.status])
			if l.res != nil {
				l.res.state = "expired"
			}
			l.status, l.possessor, l.res, l.hold = mAvailable, -1, nil, time.Time{}
		}
	}
}

// pick returns a random element.
func pick[T any](m *lockerModel, s []T) T { return s[m.rng.IntN(len(s))] }

// candidates are the lockers an operation may touch now: not near an expiry.
func (m *lockerModel) candidates(match func(*mLocker) bool) []*mLocker {
	var out []*mLocker
	for _, l := range m.lockers {
		if !l.uncertain(m.now, m.now) && (match == nil || match(l)) {
			out = append(out, l)
		}
	}
	return out
}

// target picks a locker: usually one where want holds (the interesting case), otherwise any.
func (m *lockerModel) target(want func(*mLocker) bool) *mLocker {
	if m.rng.IntN(10) < 7 {
		if l := m.pickCandidate(want); l != nil {
			return l
		}
	}
	return m.pickCandidate(nil)
}

// pickCandidate picks one of the candidates where match holds, or nil if there is none.
func (m *lockerModel) pickCandidate(match func(*mLocker) bool) *mLocker {
	c := m.candidates(match)
	if len(c) == 0 {
		return nil
	}
	return pick(m, c)
}

// duration is a short hold (1-4 s, so expiries happen during the run) or a long one.
func (m *lockerModel) duration() int {
	if m.rng.IntN(10) < 6 {
		return 1 + m.rng.IntN(4)
	}
	return 300
}

// stalled reports, after an operation that started at m.now, whether it ran so long that an
// expiry of these lockers (or these tokens) may have fallen inside it; those lockers are
// re-read from the server, and the operation's answer is not judged.
func (m *lockerModel) stalled(lockers []*mLocker, tokens ...*mToken) bool {
	after := m.dbNow()
	if after.Sub(m.now) < mUncertain-500*time.Millisecond {
		return false
	}
	crossed := false
	for _, l := range lockers {
		if l.uncertain(m.now, after) {
			crossed = true
		}
	}
	for _, tk := range tokens {
		if near(tk.expires, m.now, after) {
			crossed = true
		}
	}
	if crossed {
		for _, l := range lockers {
			m.resync(l)
		}
	}
	return crossed
}

// resync reads a locker back from the server after a stall, and forgets its tokens.
func (m *lockerModel) resync(l *mLocker) {
	m.t.Helper()
	m.resynced++
	var status int
	var possessor *string
	var resID *string
	var hold *time.Time
	require.NoError(m.t, m.e.Store.Pool().QueryRow(context.Background(), `
		SELECT status, possessor_client_id, reservation_id::text, hold_expires_at, generation, kept_possession
		FROM lockers WHERE id = $1`, l.id).Scan(&status, &possessor, &resID, &hold, &l.gen, &l.kept))
	l.status, l.possessor, l.hold, l.res = status, -1, time.Time{}, nil
	if hold != nil {
		l.hold = *hold
	}
	if possessor != nil {
		for i, c := range m.clients {
			if c.id == *possessor {
				l.possessor = i
			}
		}
	}
	if resID != nil {
		for _, r := range m.rsvs {
			if r.id == *resID {
				l.res = r
			}
		}
		if l.res == nil {
			// A reservation the model never followed (a race read back rather than judged):
			// from now on it follows it as the database has it.
			l.res = &mReservation{id: *resID, client: l.possessor, locker: l, expires: l.hold, state: "active"}
			m.rsvs = append(m.rsvs, l.res)
		}
	}
	tw, _ := m.sim.Tower(l.tower)
	for _, s := range tw.Status().Lockers {
		if s.LockerID == l.id {
			l.towerGen, l.towerOOS = s.Generation, s.OutOfService
		}
	}
	// Tokens whose fate is unknown are no use to the model any more, and the server may
	// still list them for as long as this generation lasts.
	l.forgotten, l.forgottenGen = true, l.gen
	l.tokens = nil
}

// rawDo is an HTTP call safe to make from several goroutines (no testing.T).
func rawDo(method, url, tok string, body any) (int, []byte, error) {
	r, err := testenv.Exchange(method, url, http.Header{"Authorization": {"Bearer " + tok}}, body)
	return r.Status, r.Body, err
}

// expectConflict requires a 409 whose detail names the locker's status.
func (m *lockerModel) expectConflict(r testenv.Response, l *mLocker) {
	m.t.Helper()
	require.Equal(m.t, http.StatusConflict, r.Status, "%s: %s", m.lastOp, r.Body)
	var p struct {
		Detail string `json:"detail"`
	}
	r.JSON(m.t, &p)
	require.Contains(m.t, p.Detail, mNames[l.effective(m.now)], "%s: the 409 names the status", m.lastOp)
}

// answered accounts for the answer r to an operation on locker l that the model allows when
// ok: nothing when the model's clock crossed an uncertain moment meanwhile (stalled); a 409
// naming l's status when the model refuses it; else the status want, with the body decoded
// into v. It counts the answer under name ("reserve:201", "reserve:409") and returns whether
// the operation went through.
func (m *lockerModel) answered(r testenv.Response, l *mLocker, ok bool, name string, want int, v any) bool {
	m.t.Helper()
	if m.stalled([]*mLocker{l}) {
		return false
	}
	if !ok {
		m.count(name + ":409")
		m.expectConflict(r, l)
		return false
	}
	m.count(name + ":" + strconv.Itoa(want))
	require.Equal(m.t, want, r.Status, "%s: %s", m.lastOp, r.Body)
	r.JSON(m.t, v)
	return true
}

// expiry parses an answer's expiresAt.
func (m *lockerModel) expiry(s string) time.Time {
	m.t.Helper()
	exp, err := time.Parse(time.RFC3339, s)
	require.NoError(m.t, err)
	return exp
}

// Transitions, as DESIGN §4.1 and the design decisions read them.

func (m *lockerModel) applyReserve(l *mLocker, c int, id string, expires time.Time) {
	l.gen++
	r := &mReservation{id: id, client: c, locker: l, expires: expires, state: "active"}
	m.rsvs = append(m.rsvs, r)
	l.status, l.possessor, l.res, l.hold = mReserved, c, r, expires
}

// newToken records an issued token and checks the generation it carries.
func (m *lockerModel) newToken(l *mLocker, c int, typ, id, payload, auth string, expires time.Time) *mToken {
	m.t.Helper()
	dec, err := towerproto.DecodeToken(payload, auth, towerproto.TokenKey(lcDemoTower(m.t, m.e, l.tower).Secret))
	require.NoError(m.t, err)
	require.Equal(m.t, l.gen, dec.Generation, "%s: the token carries the possession's generation", m.lastOp)
	require.Equal(m.t, l.id, dec.LockerID)
	require.Equal(m.t, expires.Unix(), dec.ExpiresAt.Unix())
	tk := &mToken{id: id, typ: typ, client: c, gen: dec.Generation, expires: expires, payload: payload, auth: auth}
	l.tokens = append(l.tokens, tk)
	return tk
}

// canIssue is the token rule of DESIGN §4.1/§4.5.
func (l *mLocker) canIssue(c int, typ string, at time.Time) bool {
	eff, own := l.effective(at), l.effectivePossessor(at) == c
	switch typ {
	case store.TokenDropoff:
		return eff == mAvailable || (own && eff != mOutOfService)
	case store.TokenPickup:
		return eff == mOccupied && own
	default:
		return eff == mDeclined && own
	}
}

// applyIssue makes the locker move a token of this type makes; call before newToken.
func (m *lockerModel) applyIssue(l *mLocker, c int, typ string, expires time.Time) {
	if typ != store.TokenDropoff {
		return
	}
	switch l.effective(m.now) {
	case mAvailable:
		l.gen++
		l.status, l.possessor, l.res, l.hold = mRented, c, nil, expires
	case mReserved:
		l.res.state = "consumed"
		l.status, l.res, l.hold = mRented, nil, expires
	case mRented, mDeclined:
		// The rental lasts until the last drop-off token of the possession expires.
		l.status = mRented
		l.hold = expires
		for _, tk := range l.tokens {
			if tk.typ == store.TokenDropoff && tk.gen == l.gen && tk.expires.After(l.hold) {
				l.hold = tk.expires
			}
		}
	}
}

func (m *lockerModel) endPossession(l *mLocker) {
	l.gen++
	l.status, l.possessor, l.res, l.hold, l.kept = mAvailable, -1, nil, time.Time{}, false
}

// applyUse is what a verified use does in the cloud (DESIGN §4.7 table).
func (m *lockerModel) applyUse(l *mLocker, tk *mToken, withItem bool) string {
	eff := l.effective(m.now)
	tk.cloudUsed = true
	if tk.gen != l.gen {
		m.anomaly++
		return "anomaly"
	}
	switch tk.typ {
	case store.TokenDropoff:
		switch {
		case !withItem:
			return "consumed"
		case eff == mOccupied:
			return "item_added"
		case eff == mRented || eff == mDeclined || eff == mAvailable:
			l.status, l.possessor, l.res, l.hold = mOccupied, tk.client, nil, time.Time{}
			return "occupied"
		}
		m.anomaly++
		return "anomaly"
	case store.TokenPickup:
		switch {
		case eff != mOccupied:
			m.anomaly++
			return "anomaly"
		case withItem:
			return "pickup_incomplete"
		}
		m.endPossession(l)
		return "picked_up"
	default:
		// A release token closing the door empty ends the possession at the tower; a locker
		// rented again during the grace follows it.
		if withItem || (eff != mDeclined && eff != mRented) {
			return "consumed"
		}
		m.endPossession(l)
		return "released"
	}
}

// Operations. Each picks its target among the lockers not near an expiry, predicts the
// answer, calls the system and checks the answer against the prediction.

func (m *lockerModel) opReserve() {
	l := m.target(func(l *mLocker) bool { return l.effective(m.now) == mAvailable })
	if l == nil {
		return
	}
	c, d := m.rng.IntN(len(m.clients)), m.duration()
	m.lastOp = fmt.Sprintf("client %d reserves locker %d for %d s", c, l.id, d)
	ok := l.effective(m.now) == mAvailable
	r := m.e.Do(http.MethodPost, reservePath(l.tower, l.id), m.token(c), map[string]any{"duration": d})
	var res reservation
	if !m.answered(r, l, ok, "reserve", http.StatusCreated, &res) {
		return
	}
	exp := m.expiry(res.ExpiresAt)
	m.applyReserve(l, c, res.ID, exp)
}

func (m *lockerModel) opCancel() {
	var cands []*mReservation
	for _, r := range m.rsvs {
		if !near(r.expires, m.now, m.now) && !r.locker.uncertain(m.now, m.now) {
			cands = append(cands, r)
		}
	}
	if len(cands) == 0 {
		return
	}
	r := cands[len(cands)-1-m.rng.IntN(min(len(cands), 8))] // mostly recent ones
	c := r.client
	if m.rng.IntN(5) == 0 {
		c = m.rng.IntN(len(m.clients))
	}
	l := r.locker
	active := r.state == "active" && r.expires.After(m.now)
	m.lastOp = fmt.Sprintf("client %d cancels reservation %s (%s) of client %d on locker %d", c, r.id, r.state, r.client, l.id)
	resp := m.e.Do(http.MethodDelete, reservePath(l.tower, l.id)+"/"+r.id, m.token(c), nil)
	if m.stalled([]*mLocker{l}) {
		return
	}
	switch {
	case c != r.client:
		m.count("cancel:409-other-client")
		require.Equal(m.t, http.StatusConflict, resp.Status, "%s: %s", m.lastOp, resp.Body)
	case active:
		m.count("cancel:204")
		require.Equal(m.t, http.StatusNoContent, resp.Status, "%s: %s", m.lastOp, resp.Body)
		r.state = "cancelled"
		l.status, l.possessor, l.res, l.hold = mAvailable, -1, nil, time.Time{}
	case r.state == "cancelled":
		m.count("cancel:204-again")
		require.Equal(m.t, http.StatusNoContent, resp.Status, "%s: %s", m.lastOp, resp.Body)
	default:
		m.count("cancel:409-" + r.state)
		require.Equal(m.t, http.StatusConflict, resp.Status, "%s: %s", m.lastOp, resp.Body)
	}
}

func (m *lockerModel) opIssue(typ string) {
	c := m.rng.IntN(len(m.clients))
	l := m.target(func(l *mLocker) bool { return l.canIssue(c, typ, m.now) })
	if l == nil {
		return
	}
	d := m.duration()
	m.lastOp = fmt.Sprintf("client %d takes a %s token (%d s) for locker %d (%s, client %d)", c, typ, d, l.id,
		mNames[l.effective(m.now)], l.effectivePossessor(m.now))
	ok := l.canIssue(c, typ, m.now)
	r := lcIssue(m.t, m.e, m.token(c), typ, l.tower, l.id, map[string]any{"duration": d})
	var tk towerTokenResp
	if !m.answered(r, l, ok, typ+"-token", http.StatusCreated, &tk) {
		return
	}
	exp := m.expiry(tk.ExpiresAt)
	m.applyIssue(l, c, typ, exp)
	m.newToken(l, c, typ, tk.ID, tk.Payload, tk.PayloadAuth, exp)
}

func (m *lockerModel) opRelease() {
	c := m.rng.IntN(len(m.clients))
	l := m.target(func(l *mLocker) bool {
		return l.effective(m.now) == mRented && l.effectivePossessor(m.now) == c
	})
	if l == nil {
		return
	}
	m.lastOp = fmt.Sprintf("client %d releases locker %d (%s, client %d)", c, l.id, mNames[l.effective(m.now)], l.effectivePossessor(m.now))
	ok := l.effective(m.now) == mRented && l.effectivePossessor(m.now) == c
	r := m.e.Do(http.MethodPost, lcReleasePath(l.tower, l.id), m.token(c), nil)
	var got locker
	if !m.answered(r, l, ok, "release", http.StatusOK, &got) {
		return
	}
	require.Equal(m.t, "declined", got.Status.Name)
	l.status, l.hold = mDeclined, m.now.Add(store.ReleaseGrace)
}

// opGraceLapses moves a declined locker's grace into the past, as the clock would.
func (m *lockerModel) opGraceLapses() {
	l := m.pickCandidate(func(l *mLocker) bool { return l.effective(m.now) == mDeclined })
	if l == nil {
		return
	}
	m.lastOp = fmt.Sprintf("the grace of declined locker %d lapses", l.id)
	_, err := m.e.Store.Pool().Exec(context.Background(),
		`UPDATE lockers SET hold_expires_at = now() - interval '3 seconds' WHERE id = $1 AND status = 5`, l.id)
	require.NoError(m.t, err)
	m.count("grace-lapses")
	l.status, l.possessor, l.res, l.hold = mAvailable, -1, nil, time.Time{}
}

// mPending is a use the tower accepted while the phone was offline: its events wait at the
// tower until the next upload of that tower.
type mPending struct {
	l        *mLocker
	tk       *mToken
	withItem bool
}

// opUse presents one of a locker's tokens at the tower, the door closing with or without an
// item. Online, the simulator uploads the tower's queued events at once (earlier offline uses
// first); offline, they wait for a later upload (opSync), so the cloud learns of the use late.
func (m *lockerModel) opUse(offline bool) {
	l := m.pickCandidate(func(l *mLocker) bool { return len(l.tokens) > 0 })
	if l == nil {
		return
	}
	var usable []*mToken
	for _, tk := range l.tokens {
		if !near(tk.expires, m.now, m.now) {
			usable = append(usable, tk)
		}
	}
	if len(usable) == 0 {
		return
	}
	// Mostly a token the tower has not accepted yet, and mostly one of the newest.
	if fresh := slices.DeleteFunc(slices.Clone(usable), func(tk *mToken) bool { return tk.towerUsed }); len(fresh) > 0 && m.rng.IntN(4) > 0 {
		usable = fresh
	}
	tk := usable[len(usable)-1-m.rng.IntN(min(len(usable), 3))]
	withItem := m.rng.IntN(5) == 0
	if tk.typ == store.TokenDropoff {
		withItem = !withItem
	}
	// An online open uploads the tower's queued uses too: their lockers must be certain.
	involved := []*mLocker{l}
	flush := m.pending[l.tower]
	if !offline {
		for _, p := range flush {
			if p.l.uncertain(m.now, m.now) {
				return
			}
			involved = append(involved, p.l)
		}
	}
	if !offline {
		m.towerSynced(l.tower)
	}
	refusal := ""
	switch {
	case l.towerOOS:
		refusal = "out_of_service"
	case tk.gen < l.towerGen:
		refusal = "stale_generation"
	case !m.now.Before(tk.expires):
		refusal = "expired"
	case tk.towerUsed:
		refusal = "already_used"
	}
	m.lastOp = fmt.Sprintf("%s token %s of client %d (gen %d) used at locker %d (%s, client %d, gen %d, tower gen %d), item %v, offline %v, %d queued",
		tk.typ, tk.id, tk.client, tk.gen, l.id, mNames[l.effective(m.now)], l.effectivePossessor(m.now), l.gen, l.towerGen, withItem, offline, len(flush))
	var opened bool
	var code string
	var res towersim.OpenResponse
	if offline {
		tw, ok := m.sim.Tower(l.tower)
		require.True(m.t, ok)
		_, err := tw.Open(context.Background(), tk.payload, tk.auth, withItem)
		code = towersim.RefusalCode(err)
		if code == "" {
			require.NoError(m.t, err, m.lastOp)
		}
		opened = err == nil
	} else {
		res = lcOpen(m.t, m.sim, l.tower, towerTokenResp{Payload: tk.payload, PayloadAuth: tk.auth}, withItem)
		opened, code = res.Opened, lcRefusal(res)
	}
	towerSide := func() {
		tk.towerUsed = true
		l.towerGen = max(l.towerGen, tk.gen)
		if (tk.typ == store.TokenPickup || tk.typ == store.TokenRelease) && !withItem {
			l.towerGen++
		}
	}
	if m.stalled(involved, tk) {
		// The tower's answer stands; what the cloud made of it was read back.
		if opened {
			tk.towerUsed = true
			if offline {
				m.pending[l.tower] = append(m.pending[l.tower], mPending{l, tk, withItem})
			} else {
				delete(m.pending, l.tower)
			}
		}
		return
	}
	if refusal != "" {
		m.count("use:refused-" + refusal)
		require.False(m.t, opened, m.lastOp)
		require.Equal(m.t, refusal, code, m.lastOp)
		return
	}
	require.True(m.t, opened, "%s: refused %s", m.lastOp, code)
	towerSide()
	if offline {
		m.count("use-offline:" + tk.typ)
		m.pending[l.tower] = append(m.pending[l.tower], mPending{l, tk, withItem})
		return
	}
	require.Empty(m.t, res.UploadError, m.lastOp)
	require.Zero(m.t, res.EventsPending, m.lastOp)
	m.applyQueued(l.tower)
	m.count("use:" + tk.typ + "-" + m.applyUse(l, tk, withItem))
}

// applyQueued applies a tower's queued uses, oldest first, as the cloud does on their upload.
func (m *lockerModel) applyQueued(tower string) {
	for _, p := range m.pending[tower] {
		m.count("late-use:" + p.tk.typ + "-" + m.applyUse(p.l, p.tk, p.withItem))
	}
	delete(m.pending, tower)
}

// opSync is the phone coming back online: it uploads a tower's queued events.
func (m *lockerModel) opSync() {
	var towers []string
	for tw, ps := range m.pending {
		if len(ps) > 0 {
			towers = append(towers, tw)
		}
	}
	if len(towers) == 0 {
		return
	}
	slices.Sort(towers)
	tower := pick(m, towers)
	var involved []*mLocker
	for _, p := range m.pending[tower] {
		if p.l.uncertain(m.now, m.now) {
			return
		}
		involved = append(involved, p.l)
	}
	m.lastOp = fmt.Sprintf("the phone uploads %d queued uses of tower %s", len(m.pending[tower]), tower)
	tw, ok := m.sim.Tower(tower)
	require.True(m.t, ok)
	// Besides the uses: the tower's reports of commands a refused online open synced.
	reports := 0
	for _, ev := range tw.PendingEvents() {
		if ev.Kind == towerproto.EventSyncCommands {
			reports++
		}
	}
	n, err := m.sim.Relay().Upload(context.Background(), tw, "")
	require.NoError(m.t, err, m.lastOp)
	require.Equal(m.t, 3*len(m.pending[tower])+reports, n, m.lastOp)
	if m.stalled(involved) {
		delete(m.pending, tower)
		return
	}
	m.count("sync")
	m.applyQueued(tower)
}

// towerSynced records that an online open at the tower synced it first (DESIGN §4.8),
// whether or not the token then opened anything: every generation move and service change
// of its lockers reached it as a command, so it now knows the cloud's.
func (m *lockerModel) towerSynced(tower string) {
	for _, o := range m.lockers {
		if o.tower == tower {
			o.towerGen, o.towerOOS = max(o.towerGen, o.gen), o.status == mOutOfService
		}
	}
}

// opForged presents a forged token, or one at the wrong tower: nothing opens or changes.
func (m *lockerModel) opForged() {
	var all []*mToken
	var at []*mLocker
	for _, l := range m.lockers {
		for _, tk := range l.tokens {
			all, at = append(all, tk), append(at, l)
		}
	}
	if len(all) == 0 {
		return
	}
	i := m.rng.IntN(len(all))
	tk, l := all[i], at[i]
	tower, payload, auth, want := l.tower, tk.payload, tk.auth, "invalid_token"
	switch m.rng.IntN(3) {
	case 0:
		// Any byte but the version and the tower id (a changed tower id is "wrong_tower").
		i := 25 + m.rng.IntN(towerproto.TokenPayloadLen-25)
		if m.rng.IntN(3) == 0 {
			i = 1 + m.rng.IntN(16)
		}
		payload = lcFlipHex(m.t, payload, i)
	case 1:
		auth = lcFlipHex(m.t, auth, 1+m.rng.IntN(32))
	default:
		tower, want = towerUnion1, "wrong_tower"
		if l.tower == towerUnion1 {
			tower = towerUnion2
		}
	}
	m.lastOp = fmt.Sprintf("forged %s token of locker %d at tower %s", tk.typ, l.id, tower)
	m.towerSynced(tower)
	res := lcOpenRaw(m.t, m.sim, tower, payload, auth, true)
	m.count("use:refused-" + want)
	require.False(m.t, res.Opened, m.lastOp)
	require.Equal(m.t, want, lcRefusal(res), m.lastOp)
}

// opOutOfService is the operator's command (the admin tool's transaction: the change, then
// the signals to the ended workflows through the outbox).
func (m *lockerModel) opOutOfService() {
	l := m.target(func(l *mLocker) bool { return l.status != mOutOfService })
	if l == nil {
		return
	}
	force := m.rng.IntN(2) == 0
	eff := l.effective(m.now)
	m.lastOp = fmt.Sprintf("operator takes locker %d (%s) out of service, force %v", l.id, mNames[eff], force)
	ctx := context.Background()
	_, err := outbox.Record(ctx, m.e.Store, 0, nil, func(tx *store.Store) ([]store.OutboxItem, error) {
		ch, err := tx.SetOutOfService(ctx, l.tower, l.id, "model", force)
		if err != nil {
			return nil, err
		}
		return outbox.EndServiceChange(ctx, tx, l.tower, l.id, ch)
	})
	if m.stalled([]*mLocker{l}) {
		return
	}
	switch {
	case eff == mOutOfService:
		m.count("out-of-service:again")
		require.NoError(m.t, err, m.lastOp)
	case eff == mOccupied && !force:
		m.count("out-of-service:refused-occupied")
		require.ErrorIs(m.t, err, store.ErrConflict, m.lastOp)
	default:
		m.count("out-of-service:" + mNames[eff])
		require.NoError(m.t, err, m.lastOp)
		if eff == mReserved {
			l.res.state = "cancelled"
		}
		l.kept = eff == mOccupied
		if !l.kept {
			l.possessor = -1
		}
		l.gen++
		l.status, l.res, l.hold = mOutOfService, nil, time.Time{}
	}
}

func (m *lockerModel) opInService() {
	l := m.target(func(l *mLocker) bool { return l.status == mOutOfService })
	if l == nil {
		return
	}
	m.lastOp = fmt.Sprintf("operator returns locker %d (%s) to service", l.id, mNames[l.effective(m.now)])
	_, err := m.e.Store.SetInService(context.Background(), l.tower, l.id)
	require.NoError(m.t, err, m.lastOp)
	if l.status != mOutOfService {
		m.count("in-service:no-op")
		return
	}
	m.count("in-service")
	l.status = mAvailable
	if l.kept {
		l.status = mOccupied
	}
	l.kept = false
}

// opRace has several clients ask for the same available locker at once (a reservation or a
// drop-off token each): exactly one wins, and the model follows whichever did.
func (m *lockerModel) opRace() {
	l := m.pickCandidate(func(l *mLocker) bool { return l.effective(m.now) == mAvailable })
	if l == nil {
		return
	}
	n := 2 + m.rng.IntN(len(m.clients)-1)
	racers := m.rng.Perm(len(m.clients))[:n]
	type answer struct {
		client, status, duration int
		kind                     string
		body                     []byte
		err                      error
	}
	answers := make([]answer, n)
	for i, cl := range racers {
		answers[i] = answer{client: cl, duration: m.duration(), kind: "reserve"}
		if m.rng.IntN(2) == 0 {
			answers[i].kind = store.TokenDropoff
			// A drop-off token's expiry is on a whole second, up to a second short of its
			// duration: two seconds at least keep its hold longer than a race usually lasts.
			answers[i].duration = max(answers[i].duration, 2)
		}
		m.token(cl)
	}
	m.lastOp = fmt.Sprintf("%d clients race for locker %d", n, l.id)
	testenv.AtOnce(len(answers), func(i int) {
		a := &answers[i]
		path := reservePath(l.tower, l.id)
		if a.kind == store.TokenDropoff {
			path = lcTokenPath(a.kind, l.tower, l.id)
		}
		a.status, a.body, a.err = rawDo(http.MethodPost, m.e.URL+path, m.clients[a.client].tok, map[string]any{"duration": a.duration})
	})
	if m.stalled([]*mLocker{l}) {
		return
	}
	// A winner's own hold may be as short as a second, and a drop-off token's up to a second
	// shorter than asked (its expiry is on a whole second: the payload carries unix
	// seconds): a race that lasted that long may have seen it lapse and a second racer win
	// after it, both rightly. Such a race is not judged either; the locker is read back.
	shortest := time.Duration(answers[0].duration) * time.Second
	for _, a := range answers {
		hold := time.Duration(a.duration) * time.Second
		if a.kind == store.TokenDropoff {
			hold -= time.Second
		}
		shortest = min(shortest, hold)
	}
	if m.dbNow().Sub(m.now) >= shortest-100*time.Millisecond {
		m.resync(l)
		return
	}
	winners := 0
	for _, a := range answers {
		require.NoError(m.t, a.err)
		switch a.status {
		case http.StatusCreated:
			winners++
			m.count("race:won-" + a.kind)
			m.lastOp += fmt.Sprintf("; client %d won with a %s", a.client, a.kind)
			var out struct {
				ID          string `json:"id"`
				ExpiresAt   string `json:"expiresAt"`
				Payload     string `json:"payload"`
				PayloadAuth string `json:"payload_auth"`
			}
			require.NoError(m.t, json.Unmarshal(a.body, &out))
			exp, err := time.Parse(time.RFC3339, out.ExpiresAt)
			require.NoError(m.t, err)
			if a.kind == "reserve" {
				m.applyReserve(l, a.client, out.ID, exp)
			} else {
				m.applyIssue(l, a.client, store.TokenDropoff, exp)
				m.newToken(l, a.client, store.TokenDropoff, out.ID, out.Payload, out.PayloadAuth, exp)
			}
		case http.StatusConflict:
			m.count("race:lost")
		default:
			m.t.Fatalf("%s: client %d answered %d: %s", m.lastOp, a.client, a.status, a.body)
		}
	}
	require.Equal(m.t, 1, winners, "%s: exactly one of the racers wins", m.lastOp)
	// The losers' 409s named what the winner made of the locker.
	for _, a := range answers {
		if a.status == http.StatusConflict {
			require.Contains(m.t, string(a.body), mNames[l.status], m.lastOp)
		}
	}
}

// opDropoffLink asks for a drop-off link of a type at the location: the server picks the
// first available locker of the type (high ones first unless low is required).
func (m *lockerModel) opDropoffLink() {
	typeID := pick(m, m.types)
	requireLow := m.rng.IntN(3) == 0
	var want []*mLocker
	for _, l := range m.lockers {
		if l.typeID != typeID {
			continue
		}
		if l.uncertain(m.now, m.now) {
			return // the server's choice could depend on the clock
		}
		if l.effective(m.now) == mAvailable && (!requireLow || l.low) {
			want = append(want, l)
		}
	}
	slices.SortFunc(want, func(a, b *mLocker) int {
		if a.low != b.low {
			if a.low {
				return 1
			}
			return -1
		}
		return int(a.id - b.id)
	})
	c, d := m.rng.IntN(len(m.clients)), m.duration()
	m.lastOp = fmt.Sprintf("client %d asks for a drop-off link, type %d, low %v (%d candidates)", c, typeID, requireLow, len(want))
	r := m.e.Do(http.MethodPost, lcLinkBase+"dropoff-locker-request", m.token(c),
		map[string]any{"locationId": m.location, "lockerTypeId": strconv.FormatInt(typeID, 10), "requireLowLocker": requireLow, "duration": d})
	if m.stalled(want) {
		return
	}
	if len(want) == 0 {
		m.count("dropoff-link:409")
		require.Equal(m.t, http.StatusConflict, r.Status, "%s: %s", m.lastOp, r.Body)
		return
	}
	m.count("dropoff-link:201")
	require.Equal(m.t, http.StatusCreated, r.Status, "%s: %s", m.lastOp, r.Body)
	var link lcLink
	r.JSON(m.t, &link)
	l := want[0]
	require.Equal(m.t, l.id, link.LockerID, "%s: the first candidate", m.lastOp)
	exp := m.expiry(link.ExpiresAt)
	payload, auth, _ := strings.Cut(link.LinkToken, ".")
	dec, err := towerproto.DecodeToken(payload, auth, towerproto.TokenKey(lcDemoTower(m.t, m.e, l.tower).Secret))
	require.NoError(m.t, err)
	m.applyIssue(l, c, store.TokenDropoff, exp)
	m.newToken(l, c, store.TokenDropoff, uuid.UUID(dec.ID).String(), payload, auth, exp)
}

// opPickupLink asks for a pickup link to a locker.
func (m *lockerModel) opPickupLink() {
	c := m.rng.IntN(len(m.clients))
	l := m.target(func(l *mLocker) bool { return l.canIssue(c, store.TokenPickup, m.now) })
	if l == nil {
		return
	}
	d := m.duration()
	ok := l.canIssue(c, store.TokenPickup, m.now)
	m.lastOp = fmt.Sprintf("client %d asks for a pickup link to locker %d (%s, client %d)", c, l.id, mNames[l.effective(m.now)], l.effectivePossessor(m.now))
	r := m.e.Do(http.MethodPost, lcLinkBase+"pickup-locker-request", m.token(c), map[string]any{"lockerId": l.id, "duration": d})
	var link lcLink
	if !m.answered(r, l, ok, "pickup-link", http.StatusCreated, &link) {
		return
	}
	exp := m.expiry(link.ExpiresAt)
	payload, auth, _ := strings.Cut(link.LinkToken, ".")
	dec, err := towerproto.DecodeToken(payload, auth, towerproto.TokenKey(lcDemoTower(m.t, m.e, l.tower).Secret))
	require.NoError(m.t, err)
	m.newToken(l, c, store.TokenPickup, uuid.UUID(dec.ID).String(), payload, auth, exp)
}

// opIdle lets time pass, so holds and tokens run out.
func (m *lockerModel) opIdle() {
	m.count("idle")
	time.Sleep(time.Duration(100+m.rng.IntN(400)) * time.Millisecond)
}

// compare checks every locker whose state is certain against the server.
func (m *lockerModel) compare() {
	m.t.Helper()
	lo := m.now
	r := m.e.Do(http.MethodGet, fmt.Sprintf("/api/v1/locations/%d/lockers", m.location), m.token(0), nil)
	require.Equal(m.t, http.StatusOK, r.Status, "%s", r.Body)
	var ls []locker
	r.JSON(m.t, &ls)
	status := make(map[int64]string, len(ls))
	for _, l := range ls {
		status[l.ID] = l.Status.Name
	}
	assigned := make([]map[int64]lcAssignedLocker, len(m.clients))
	for i := range m.clients {
		assigned[i] = lcAssigned(m.t, m.e, m.token(i))
	}
	gens := map[int64]uint32{}
	rows, err := m.e.Store.Pool().Query(context.Background(), `SELECT id, generation FROM lockers WHERE location_id = $1`, m.location)
	require.NoError(m.t, err)
	for rows.Next() {
		var id int64
		var g uint32
		require.NoError(m.t, rows.Scan(&id, &g))
		gens[id] = g
	}
	require.NoError(m.t, rows.Err())
	hi := m.dbNow()

	for _, l := range m.lockers {
		if l.uncertain(lo, hi) {
			m.skipped++
			continue
		}
		m.compared++
		eff, owner := l.effective(hi), l.effectivePossessor(hi)
		where := fmt.Sprintf("step %d, after %q: locker %d", m.step, m.lastOp, l.id)
		require.Equal(m.t, mNames[eff], status[l.id], "%s: status", where)
		require.Equal(m.t, l.gen, gens[l.id], "%s: generation", where)
		listed := eff == mReserved || eff == mRented || eff == mOccupied || eff == mDeclined || (eff == mOutOfService && l.kept)
		for i := range m.clients {
			a, ok := assigned[i][l.id]
			if !listed || i != owner {
				require.False(m.t, ok, "%s: listed for client %d (model: %s, client %d)", where, i, mNames[eff], owner)
				continue
			}
			require.True(m.t, ok, "%s: not listed for its possessor, client %d", where, i)
			require.Equal(m.t, mNames[eff], a.Status.Name, where)
			require.NotNil(m.t, a.Possession, where)
			if eff == mReserved {
				require.NotNil(m.t, a.Possession.ReservationID, where)
				require.Equal(m.t, l.res.id, *a.Possession.ReservationID, where)
			} else {
				require.Nil(m.t, a.Possession.ReservationID, where)
			}
			if l.tokensUncertain(lo, hi) {
				continue
			}
			got := make([]string, 0, len(a.Possession.ActiveTokens))
			for _, tk := range a.Possession.ActiveTokens {
				got = append(got, tk.ID)
			}
			slices.Sort(got)
			want := l.activeTokens(hi)
			if eff == mOutOfService {
				want = nil // out of service revoked them all
			}
			require.ElementsMatch(m.t, want, got, "%s: active tokens", where)
		}
	}
}

func TestLifecycleModel(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("LOCKERNET_MODEL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	ops := 2000
	if s := os.Getenv("LOCKERNET_MODEL_OPS"); s != "" {
		v, err := strconv.Atoi(s)
		require.NoError(t, err)
		ops = v
	}
	t.Logf("model seed %d (reproduce: LOCKERNET_MODEL_SEED=%d go test ./apiserver -run TestLifecycleModel)", seed, seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FAILED with model seed %d: LOCKERNET_MODEL_SEED=%d go test ./apiserver -run TestLifecycleModel", seed, seed)
		}
	})

	e := testenv.Start(t, testenv.Options{})
	m := &lockerModel{t: t, e: e, sim: e.TowerSim(t), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		byID: map[int64]*mLocker{}, counts: map[string]int{}, pending: map[string][]mPending{}, location: locationID(t, e, towerUnion1)}
	require.Equal(t, m.location, locationID(t, e, towerUnion2))
	m.clients = append(m.clients, &mClient{id: e.Creds.ServiceProvider.ClientID, secret: e.Creds.ServiceProvider.ClientSecret})
	for i := 1; i < 3; i++ {
		cl := &mClient{id: fmt.Sprintf("model-client-%d", i), secret: credential.NewSecret()}
		require.NoError(t, e.Store.CreateClient(context.Background(), store.Client{ClientID: cl.id, OrganizationID: e.Creds.OrganizationID,
			Name: "model client", SecretHash: credential.Hash(cl.secret), Scopes: []string{jwtauth.ScopeServiceProvider, jwtauth.ScopeTowerAccess}}))
		m.clients = append(m.clients, cl)
	}
	for i := range m.clients {
		m.token(i)
	}
	r := e.Do(http.MethodGet, fmt.Sprintf("/api/v1/locations/%d/lockers", m.location), m.token(0), nil)
	require.Equal(t, http.StatusOK, r.Status)
	var ls []locker
	r.JSON(t, &ls)
	require.Len(t, ls, 24, "Union Station: two towers of 12 lockers")
	for _, k := range ls {
		l := &mLocker{id: k.ID, tower: k.TowerID, typeID: k.Type.ID, low: k.IsLowLocker, status: mAvailable, possessor: -1}
		require.NoError(t, e.Store.Pool().QueryRow(context.Background(), `SELECT generation FROM lockers WHERE id = $1`, k.ID).Scan(&l.gen))
		tw, ok := m.sim.Tower(l.tower)
		require.True(t, ok)
		for _, st := range tw.Status().Lockers {
			if st.LockerID == l.id {
				l.towerGen = st.Generation
			}
		}
		m.lockers = append(m.lockers, l)
		m.byID[l.id] = l
		if !slices.Contains(m.types, l.typeID) {
			m.types = append(m.types, l.typeID)
		}
	}

	type op struct {
		weight int
		run    func()
	}
	table := []op{
		{10, m.opReserve},
		{4, m.opCancel},
		{14, func() { m.opIssue(store.TokenDropoff) }},
		{8, func() { m.opIssue(store.TokenPickup) }},
		{5, func() { m.opIssue(store.TokenRelease) }},
		{6, m.opRelease},
		{1, m.opGraceLapses},
		{14, func() { m.opUse(false) }},
		{4, func() { m.opUse(true) }},
		{2, m.opSync},
		{2, m.opForged},
		{2, m.opOutOfService},
		{3, m.opInService},
		{4, m.opRace},
		{3, m.opDropoffLink},
		{2, m.opPickupLink},
		{2, m.opIdle},
	}
	total := 0
	for _, o := range table {
		total += o.weight
	}
	start := time.Now()
	for m.step = 1; m.step <= ops; m.step++ {
		m.now = m.dbNow()
		m.settle()
		m.lastOp = "nothing"
		n := m.rng.IntN(total)
		for _, o := range table {
			if n < o.weight {
				o.run()
				break
			}
			n -= o.weight
		}
		m.compare()
	}
	elapsed := time.Since(start)

	require.Equal(t, m.anomaly, lcCount(t, e, `SELECT count(*) FROM tower_anomalies`), "every anomaly the model expected is recorded, and no other")
	names := make([]string, 0, len(m.counts))
	for k := range m.counts {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "\n  %-36s %5d", k, m.counts[k])
	}
	t.Logf("model: %d steps in %s (seed %d); locker comparisons %d, skipped as uncertain %d, resynced after stalls %d; anomalies %d; operations:%s",
		ops, elapsed.Round(time.Millisecond), seed, m.compared, m.skipped, m.resynced, m.anomaly, b.String())
}
