package apiserver_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/towerproto"
)

// The mobile SDK API (DESIGN §4.8), over HTTP with the request shapes Harbor's SDKs send:
// tower ids upper-case in paths, hex upper-case in bodies. Answers are parsed the way the
// SDKs parse them: into the exact types they expect.

// sdkTower is a demo-organization tower whose id has hex letters, so upper- and lower-case
// spellings differ.
type sdkTower struct {
	ID       string // lower-case, as stored
	Upper    string // as the SDK sends it
	Secret   []byte
	LockerID int64
}

func newSDKTower(t *testing.T, e *testenv.Env, id string, lockers int) sdkTower {
	t.Helper()
	ctx := context.Background()
	tw := sdkTower{ID: id, Upper: strings.ToUpper(id), Secret: []byte("sdk test tower secret " + id)}
	_, err := e.Store.EnsureTower(ctx, store.Tower{ID: id, OrganizationID: e.Creds.OrganizationID,
		LocationID: locationID(t, e, towerUnion1), Name: "Tower " + id, SecretSealed: e.Keyring.Seal("tower:"+id, tw.Secret)})
	require.NoError(t, err)
	typeID, err := e.Store.UpsertLockerType(ctx, e.Creds.OrganizationID, store.LockerType{Name: "small", SortOrder: 1})
	require.NoError(t, err)
	for i := range lockers {
		lid, err := e.Store.EnsureLocker(ctx, store.NewLocker{TowerID: id, Name: fmt.Sprint(i + 1), TypeID: typeID})
		require.NoError(t, err)
		if i == 0 {
			tw.LockerID = lid
		}
	}
	return tw
}

// sdkLogin is what the SDK's login does: POST /sdk/v1/login/access-token with a form.
func sdkLogin(t *testing.T, e *testenv.Env, username, password string) testenv.Response {
	t.Helper()
	form := url.Values{"username": {username}, "password": {password}}
	return send(t, http.MethodPost, e.URL+"/sdk/v1/login/access-token",
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, strings.NewReader(form.Encode()))
}

// startSDKTower starts an env without a worker, adds the tower id with lockers lockers, and
// returns them with an SDK (tower_access) token.
func startSDKTower(t *testing.T, id string, lockers int) (*testenv.Env, sdkTower, string) {
	t.Helper()
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	tw := newSDKTower(t, e, id, lockers)
	return e, tw, sdkToken(t, e)
}

func sdkToken(t *testing.T, e *testenv.Env) string {
	t.Helper()
	r := sdkLogin(t, e, e.Creds.ServiceProvider.ClientID, e.Creds.ServiceProvider.ClientSecret)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	r.JSON(t, &tok)
	return tok.AccessToken
}

// sessionAnswer is the session-token answer as the SDK decodes it: four non-null strings.
type sessionAnswer struct {
	Payload     *string `json:"payload"`
	PayloadAuth *string `json:"payload_auth"`
	SessionSeed *string `json:"session_seed"`
	TowerID     *string `json:"tower_id"`
}

// openSession checks that a session-token call answered 200 and opens the payload it answered
// with the tower's key, as only the tower can.
func openSession(t *testing.T, r testenv.Response, tw sdkTower) (sessionAnswer, towerproto.Session) {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var a sessionAnswer
	r.JSON(t, &a)
	require.NotNil(t, a.Payload)
	require.NotNil(t, a.PayloadAuth)
	s, err := towerproto.OpenSession(*a.Payload, *a.PayloadAuth, towerproto.SessionKey(tw.Secret))
	require.NoError(t, err)
	return a, s
}

func evenHex(t *testing.T, s *string) []byte {
	t.Helper()
	require.NotNil(t, s)
	require.Zero(t, len(*s)%2, "even-length hex: %q", *s)
	b, err := hex.DecodeString(*s)
	require.NoError(t, err)
	return b
}

func TestSDKSessionToken(t *testing.T) {
	t.Parallel()
	e, tw, tok := startSDKTower(t, "01000000000000ab", 2)
	path := "/sdk/v1/towers/" + tw.Upper + "/session-token"

	for _, tc := range []struct {
		name string
		body string
		fw   *string
	}{
		{"version present", `{"duration": 600, "claims": ["locker_delivery"], "version": "2.4.1"}`, new("2.4.1")},
		{"version empty", `{"duration": 600, "claims": ["locker_delivery"], "version": ""}`, nil},
		{"version absent", `{"duration": 600, "claims": ["locker_delivery"]}`, nil},
		{"version null", `{"duration": 600, "claims": ["locker_delivery"], "version": null}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now().Truncate(time.Second)
			r := e.Do(http.MethodPost, path, tok, tc.body)
			// Only the tower can read it, with the key derived from its secret.
			a, s := openSession(t, r, tw)
			assert.Equal(t, []string{"payload", "payload_auth", "session_seed", "tower_id"}, keys(r.Map(t)))
			evenHex(t, a.Payload)
			evenHex(t, a.PayloadAuth)
			seed := evenHex(t, a.SessionSeed)
			require.NotNil(t, a.TowerID)
			assert.Equal(t, tw.Upper, *a.TowerID, "tower_id is the path's id exactly as sent")
			assert.Equal(t, tw.ID, s.TowerID)
			assert.Equal(t, e.Creds.ServiceProvider.ClientID, s.ClientID)
			assert.Empty(t, s.UserID, "a client's own token names no app user")
			assert.Equal(t, []string{"locker_delivery"}, s.Claims)
			assert.Equal(t, towerproto.PermSync|towerproto.PermOpenDropoff, s.Permission)
			assert.Equal(t, seed, s.Seed, "the session key is the session_seed")
			assert.False(t, s.IssuedAt.Before(before))
			assert.Equal(t, 600*time.Second, s.ExpiresAt.Sub(s.IssuedAt))
			_, err := towerproto.OpenSession(*a.Payload, *a.PayloadAuth, towerproto.SessionKey([]byte("another tower")))
			assert.ErrorIs(t, err, towerproto.ErrBadMAC)

			var fw *string
			require.NoError(t, e.Store.Pool().QueryRow(context.Background(),
				`SELECT firmware_version FROM tower_sessions WHERE id = $1`, s.ID[:]).Scan(&fw))
			assert.Equal(t, tc.fw, fw)
		})
	}

	t.Run("lower-case path, every claim of the demo client", func(t *testing.T) {
		for _, c := range towerproto.AllClaims {
			t.Run(c, func(t *testing.T) {
				a, s := openSession(t, e.Do(http.MethodPost, "/sdk/v1/towers/"+tw.ID+"/session-token", tok, map[string]any{"duration": 60, "claims": []string{c}}), tw)
				assert.Equal(t, tw.ID, *a.TowerID)
				want, _ := towerproto.ClaimPermission(c)
				assert.Equal(t, want, s.Permission, c)
			})
		}
	})

	t.Run("the app's user from login/authorize", func(t *testing.T) {
		r := e.Do(http.MethodPost, "/api/v1/login/authorize", demoToken(t, e, jwtauth.ScopeServiceProvider), map[string]any{"userId": "user-17"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var sdk struct {
			AccessToken string `json:"access_token"`
		}
		r.JSON(t, &sdk)
		_, s := openSession(t, e.Do(http.MethodPost, path, sdk.AccessToken, map[string]any{"duration": 60, "claims": []string{"developer"}}), tw)
		assert.Equal(t, "user-17", s.UserID)
		assert.Equal(t, e.Creds.ServiceProvider.ClientID, s.ClientID)
	})

	t.Run("safe to repeat", func(t *testing.T) {
		body := `{"duration": 60, "claims": ["sync_packet"]}`
		r1 := e.Do(http.MethodPost, path, tok, body)
		r2 := e.Do(http.MethodPost, path, tok, body)
		require.Equal(t, http.StatusOK, r1.Status)
		require.Equal(t, http.StatusOK, r2.Status)
		assert.NotEqual(t, r1.Map(t)["session_seed"], r2.Map(t)["session_seed"], "each answer is a session of its own")
	})

	t.Run("claims a client may not use", func(t *testing.T) {
		other := secondDemoClient(t, e, "sdk-default-claims")
		r := e.Do(http.MethodPost, path, other, map[string]any{"duration": 60, "claims": []string{"developer"}})
		m := requireProblem(t, r, http.StatusForbidden)
		assert.Contains(t, m["detail"], "developer")
		r = e.Do(http.MethodPost, path, other, map[string]any{"duration": 60, "claims": []string{"locker_delivery"}})
		require.Equal(t, http.StatusOK, r.Status, "the default claims: %s", r.Body)

		require.NoError(t, e.Store.SetClientSDKClaims(context.Background(), "sdk-default-claims", []string{"sync_packet"}))
		r = e.Do(http.MethodPost, path, other, map[string]any{"duration": 60, "claims": []string{"locker_delivery"}})
		requireProblem(t, r, http.StatusForbidden)
		r = e.Do(http.MethodPost, path, other, map[string]any{"duration": 60, "claims": []string{"sync_packet"}})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	})

	t.Run("auth and tenancy", func(t *testing.T) {
		body := map[string]any{"duration": 60, "claims": []string{"sync_packet"}}
		requireProblem(t, e.Do(http.MethodPost, path, "", body), http.StatusUnauthorized)
		requireProblem(t, e.Do(http.MethodPost, path, "not-a-jwt", body), http.StatusUnauthorized)
		requireProblem(t, e.Do(http.MethodPost, path, demoToken(t, e, jwtauth.ScopeServiceProvider), body), http.StatusForbidden)
		o := e.NewOtherOrg(t)
		requireProblem(t, e.Do(http.MethodPost, "/sdk/v1/towers/"+strings.ToUpper(o.TowerID)+"/session-token", tok, body), http.StatusNotFound)
		rival := issue(t, e, o.ClientID, o.OrgID, jwtauth.ScopeTowerAccess)
		requireProblem(t, e.Do(http.MethodPost, path, rival, body), http.StatusNotFound)
		requireProblem(t, e.Do(http.MethodPost, "/sdk/v1/towers/0FFFFFFFFFFFFFFF/session-token", tok, body), http.StatusNotFound)
	})

	t.Run("bad input is a 4xx with a detail", func(t *testing.T) {
		for name, body := range map[string]string{
			"unknown claim":      `{"duration": 60, "claims": ["root"]}`,
			"no claims":          `{"duration": 60, "claims": []}`,
			"claims not a list":  `{"duration": 60, "claims": "developer"}`,
			"claim not a string": `{"duration": 60, "claims": [7]}`,
			"duration zero":      `{"duration": 0, "claims": ["sync_packet"]}`,
			"duration too long":  `{"duration": 86401, "claims": ["sync_packet"]}`,
			"duration huge":      `{"duration": 1e300, "claims": ["sync_packet"]}`,
			"duration a string":  `{"duration": "60", "claims": ["sync_packet"]}`,
			"duration missing":   `{"claims": ["sync_packet"]}`,
			"version a number":   `{"duration": 60, "claims": ["sync_packet"], "version": 2}`,
			"version too long":   `{"duration": 60, "claims": ["sync_packet"], "version": "` + strings.Repeat("9", 65) + `"}`,
			"version with NUL":   `{"duration": 60, "claims": ["sync_packet"], "version": "1.0\u0000"}`,
			"not JSON":           `duration=60`,
			"empty":              ``,
		} {
			r := e.Do(http.MethodPost, path, tok, body)
			assert.True(t, r.Status >= 400 && r.Status < 500, "%s: %d %s", name, r.Status, r.Body)
			requireProblem(t, r, r.Status)
		}
		requireProblem(t, e.Do(http.MethodPost, "/sdk/v1/towers/01000000000000AG/session-token", tok,
			map[string]any{"duration": 60, "claims": []string{"sync_packet"}}), http.StatusUnprocessableEntity)
	})
}

func TestSDKLoginAndServices(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true})

	r := sdkLogin(t, e, e.Creds.ServiceProvider.ClientID, e.Creds.ServiceProvider.ClientSecret)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, []string{"access_token", "token_type"}, keys(r.Map(t)))
	var login struct {
		AccessToken *string `json:"access_token"`
		TokenType   *string `json:"token_type"`
	}
	r.JSON(t, &login)
	require.NotNil(t, login.AccessToken)
	assert.Equal(t, "bearer", *login.TokenType)
	p, err := e.Auth.Verify(context.Background(), *login.AccessToken)
	require.NoError(t, err)
	assert.Equal(t, []string{jwtauth.ScopeTowerAccess}, p.Scopes)
	assert.Equal(t, e.Creds.ServiceProvider.ClientID, p.ClientID)

	// The services list, trailing slash exactly.
	r = e.Do(http.MethodGet, "/sdk/v1/services/", *login.AccessToken, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var services []struct {
		Name *string `json:"name"`
		UUID *string `json:"uuid"`
	}
	r.JSON(t, &services)
	require.NotEmpty(t, services)
	assert.Equal(t, "tower", *services[0].Name)
	assert.Len(t, *services[0].UUID, 36)
	// An SDK sends Content-Type: application/json with an empty body on GET.
	r = testenv.DoWithHeaders(t, http.MethodGet, e.URL+"/sdk/v1/services/",
		map[string]string{"Authorization": "Bearer " + *login.AccessToken, "Content-Type": "application/json"}, nil)
	assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	requireProblem(t, e.Do(http.MethodGet, "/sdk/v1/services/", "", nil), http.StatusUnauthorized)

	// Anything but a client's id and secret is a 401 with a detail.
	noSDK := "sdk-no-tower-access"
	secret := credential.NewSecret()
	require.NoError(t, e.Store.CreateClient(context.Background(), store.Client{ClientID: noSDK, OrganizationID: e.Creds.OrganizationID,
		Name: "server only", SecretHash: credential.Hash(secret), Scopes: []string{jwtauth.ScopeServiceProvider}}))
	for name, creds := range map[string][2]string{
		"wrong password":       {e.Creds.ServiceProvider.ClientID, "nope"},
		"unknown user":         {"nobody", "nope"},
		"no password":          {e.Creds.ServiceProvider.ClientID, ""},
		"nothing":              {"", ""},
		"no tower_access":      {noSDK, secret},
		"NUL in the username":  {"demo\x00", "x"},
		"a very long username": {strings.Repeat("u", 10000), "x"},
	} {
		r := sdkLogin(t, e, creds[0], creds[1])
		requireProblem(t, r, http.StatusUnauthorized)
		_ = name
	}
	r = send(t, http.MethodPost, e.URL+"/sdk/v1/login/access-token", http.Header{"Content-Type": {"application/json"}},
		strings.NewReader(`{"username": "a", "password": "b"}`))
	requireProblem(t, r, http.StatusUnprocessableEntity)
	r = send(t, http.MethodPost, e.URL+"/sdk/v1/login/access-token", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
		strings.NewReader(`username=%zz`))
	requireProblem(t, r, http.StatusUnprocessableEntity)
}

// commandBatch is a GET .../commands element as the SDK decodes it.
type commandBatch struct {
	TowerID          *string `json:"towerId"`
	SyncCommandStart *int64  `json:"syncCommandStart"`
	SyncCommandCount *int    `json:"syncCommandCount"`
	Payload          *string `json:"payload"`
	PayloadAuth      *string `json:"payloadAuth"`
}

// sdkCommands fetches and verifies a tower's pending commands.
func sdkCommands(t *testing.T, e *testenv.Env, tok string, tw sdkTower) []towerproto.CommandBatch {
	t.Helper()
	r := e.Do(http.MethodGet, "/sdk/v1/towers/"+tw.Upper+"/commands", tok, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var raw []commandBatch
	r.JSON(t, &raw)
	require.NotNil(t, raw, "an array, [] when empty: %s", r.Body)
	var out []towerproto.CommandBatch
	for _, b := range raw {
		assert.Equal(t, tw.Upper, *b.TowerID)
		p, a := evenHex(t, b.Payload), evenHex(t, b.PayloadAuth)
		got, err := towerproto.DecodeCommands(p, a, towerproto.CommandKey(tw.Secret))
		require.NoError(t, err)
		assert.Equal(t, tw.ID, got.TowerID)
		assert.EqualValues(t, *b.SyncCommandStart, got.Number)
		assert.Equal(t, *b.SyncCommandCount, len(got.Commands))
		assert.True(t, got.ExpiresAt.After(time.Now()))
		out = append(out, got)
	}
	return out
}

func flatCommands(bs []towerproto.CommandBatch) []towerproto.Command {
	var out []towerproto.Command
	for _, b := range bs {
		out = append(out, b.Commands...)
	}
	return out
}

// uploadSigned uploads events signed with the tower's event key, hex upper-case as the SDK
// writes it.
func uploadSigned(t *testing.T, e *testenv.Env, tok string, tw sdkTower, batches ...towerproto.Batch) testenv.Response {
	t.Helper()
	var envs []towerproto.BatchEnvelope
	for _, b := range batches {
		env, err := towerproto.EncodeBatch(b, towerproto.EventKey(tw.Secret))
		require.NoError(t, err)
		env.Payload, env.PayloadAuth = strings.ToUpper(env.Payload), strings.ToUpper(env.PayloadAuth)
		envs = append(envs, env)
	}
	return e.Do(http.MethodPost, "/sdk/v1/towers/"+tw.Upper+"/events", tok, envs)
}

func TestSDKCommandsAndConfiguration(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{})
	tw := newSDKTower(t, e, "01000000000000cd", 3)
	tok := sdkToken(t, e)
	sp := demoToken(t, e, jwtauth.ScopeServiceProvider)
	ctx := context.Background()

	// A tower nobody has touched: nothing to apply, an empty array (not null, not empty body).
	r := e.Do(http.MethodGet, "/sdk/v1/towers/"+tw.Upper+"/commands", tok, nil)
	require.Equal(t, http.StatusOK, r.Status)
	assert.JSONEq(t, `[]`, string(r.Body))

	// A reservation starts a possession: its generation is the floor.
	reserve(t, e, sp, tw.ID, tw.LockerID, 600)
	var gen int32
	require.NoError(t, e.Store.Pool().QueryRow(ctx, `SELECT generation FROM lockers WHERE id = $1`, tw.LockerID).Scan(&gen))
	got := sdkCommands(t, e, tok, tw)
	require.Len(t, got, 1)
	assert.EqualValues(t, 1, got[0].Number)
	assert.Equal(t, []towerproto.Command{{Kind: towerproto.CommandGenerationFloor, Arg1: uint64(tw.LockerID), Arg2: uint64(gen)}}, got[0].Commands)

	// Out of service: the floor moves again and the service state follows, in the operator's
	// transaction.
	require.NoError(t, e.Store.WithTx(ctx, func(tx *store.Store) error {
		_, err := tx.SetOutOfService(ctx, tw.ID, tw.LockerID, "door sensor", false)
		return err
	}))
	all := flatCommands(sdkCommands(t, e, tok, tw))
	require.Len(t, all, 3)
	assert.Equal(t, towerproto.Command{Kind: towerproto.CommandGenerationFloor, Arg1: uint64(tw.LockerID), Arg2: uint64(gen + 1)}, all[1])
	assert.Equal(t, towerproto.Command{Kind: towerproto.CommandServiceState, Arg1: uint64(tw.LockerID), Arg2: 1}, all[2])

	// The configuration: every locker's floor and service state, as of command 3.
	r = e.Do(http.MethodGet, "/sdk/v1/towers/"+tw.Upper+"/configuration", tok, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, []string{"commands", "towerId"}, keys(r.Map(t)))
	var conf struct {
		TowerID  *string  `json:"towerId"`
		Commands []string `json:"commands"`
	}
	r.JSON(t, &conf)
	assert.Equal(t, tw.Upper, *conf.TowerID)
	require.NotEmpty(t, conf.Commands)
	state := map[uint64][2]uint64{}
	for _, c := range conf.Commands {
		pkt := evenHex(t, &c)
		p, a, err := towerproto.SplitPacket(pkt)
		require.NoError(t, err)
		b, err := towerproto.DecodeCommands(p, a, towerproto.CommandKey(tw.Secret))
		require.NoError(t, err)
		assert.True(t, b.Snapshot)
		assert.EqualValues(t, 3, b.Number, "the log position the snapshot reflects")
		for _, c := range b.Commands {
			s := state[c.Arg1]
			switch c.Kind {
			case towerproto.CommandGenerationFloor:
				s[0] = c.Arg2
			case towerproto.CommandServiceState:
				s[1] = c.Arg2
			}
			state[c.Arg1] = s
		}
	}
	assert.Len(t, state, 3, "every locker of the tower")
	assert.Equal(t, [2]uint64{uint64(gen + 1), 1}, state[uint64(tw.LockerID)])

	// The tower applied commands 1-3 and says so: they leave the list. Replaying the report
	// changes nothing.
	at := time.Now().UTC().Truncate(time.Millisecond)
	sync := towerproto.Batch{TowerID: tw.ID, BootEpoch: 1, Events: []towerproto.Event{{Seq: 1, Kind: towerproto.EventSyncCommands, At: at, Command: 3}}}
	r = uploadSigned(t, e, tok, tw, sync)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, []string{"accepted", "duplicates", "msg"}, keys(r.Map(t)))
	assert.EqualValues(t, 1, r.Map(t)["accepted"])
	assert.Empty(t, sdkCommands(t, e, tok, tw))
	r = uploadSigned(t, e, tok, tw, sync)
	assert.EqualValues(t, 1, r.Map(t)["duplicates"])
	assert.Empty(t, sdkCommands(t, e, tok, tw))

	// A real event is stored: the cloud acknowledges the events up to it, so the tower may
	// forget them.
	door := towerproto.Batch{TowerID: tw.ID, BootEpoch: 1, Events: []towerproto.Event{{Seq: 2, Kind: towerproto.EventDoorOpened, At: at, LockerID: tw.LockerID}}}
	require.Equal(t, http.StatusOK, uploadSigned(t, e, tok, tw, door).Status)
	got = sdkCommands(t, e, tok, tw)
	require.Len(t, got, 1)
	assert.EqualValues(t, 4, got[0].Number)
	assert.Equal(t, []towerproto.Command{{Kind: towerproto.CommandEventsAck, Arg1: 1, Arg2: 2}}, got[0].Commands)

	// A tower without lockers has no configuration: 404, never commands: [].
	empty := newSDKTower(t, e, "01000000000000ef", 0)
	requireProblem(t, e.Do(http.MethodGet, "/sdk/v1/towers/"+empty.Upper+"/configuration", tok, nil), http.StatusNotFound)
	r = e.Do(http.MethodGet, "/sdk/v1/towers/"+empty.Upper+"/commands", tok, nil)
	require.Equal(t, http.StatusOK, r.Status)
	assert.JSONEq(t, `[]`, string(r.Body))

	// Another organization's tower, or no token.
	o := e.NewOtherOrg(t)
	for _, p := range []string{"/commands", "/configuration"} {
		requireProblem(t, e.Do(http.MethodGet, "/sdk/v1/towers/"+o.TowerID+p, tok, nil), http.StatusNotFound)
		requireProblem(t, e.Do(http.MethodGet, "/sdk/v1/towers/"+tw.Upper+p, "", nil), http.StatusUnauthorized)
		requireProblem(t, e.Do(http.MethodGet, "/sdk/v1/towers/"+tw.Upper+p, sp, nil), http.StatusForbidden)
	}
}

func TestSDKEventsUpload(t *testing.T) {
	t.Parallel()
	e, tw, tok := startSDKTower(t, "01000000000000a1", 1)
	at := time.Now().UTC().Truncate(time.Millisecond)
	door := func(seq uint64) towerproto.Event {
		return towerproto.Event{Seq: seq, Kind: towerproto.EventDoorOpened, At: at, LockerID: tw.LockerID}
	}

	// Five batches in one call (the SDK's most), upper-case hex, one of them the empty pull.
	batches := []towerproto.Batch{
		{TowerID: tw.ID, BootEpoch: 2, Events: []towerproto.Event{door(1), door(2)}},
		{TowerID: tw.ID, BootEpoch: 2, Events: []towerproto.Event{door(3)}},
		{TowerID: tw.ID, BootEpoch: 2, Events: []towerproto.Event{door(4)}},
		{TowerID: tw.ID, BootEpoch: 2, Events: []towerproto.Event{door(5), door(6)}},
		{TowerID: tw.ID, BootEpoch: 2, Start: 7},
	}
	r := uploadSigned(t, e, tok, tw, batches...)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var res struct {
		Msg        *string `json:"msg"`
		Accepted   *int    `json:"accepted"`
		Duplicates *int    `json:"duplicates"`
	}
	r.JSON(t, &res)
	require.NotNil(t, res.Msg)
	assert.Equal(t, 6, *res.Accepted)
	assert.Equal(t, 0, *res.Duplicates)
	// The same upload again (the SDK uploads until the tower's commands acknowledge them).
	r = uploadSigned(t, e, tok, tw, batches...)
	r.JSON(t, &res)
	assert.Equal(t, 0, *res.Accepted)
	assert.Equal(t, 6, *res.Duplicates)

	// An empty pull alone, signed or not signed at all.
	r = uploadSigned(t, e, tok, tw, towerproto.Batch{TowerID: tw.ID, BootEpoch: 2, Start: 7})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = e.Do(http.MethodPost, "/sdk/v1/towers/"+tw.Upper+"/events", tok, `[{"syncEventStart": 0, "syncEventCount": 0, "payload": "", "payloadAuth": ""}]`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r.JSON(t, &res)
	assert.Equal(t, 0, *res.Accepted)
	r = e.Do(http.MethodPost, "/sdk/v1/towers/"+tw.Upper+"/events", tok, `[]`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	// Bad input: a 4xx with a detail, never a 5xx.
	good, err := towerproto.EncodeBatch(towerproto.Batch{TowerID: tw.ID, BootEpoch: 2, Events: []towerproto.Event{door(8)}}, towerproto.EventKey(tw.Secret))
	require.NoError(t, err)
	other, err := towerproto.EncodeBatch(towerproto.Batch{TowerID: "0100000000000011", BootEpoch: 2, Events: []towerproto.Event{door(8)}}, towerproto.EventKey(tw.Secret))
	require.NoError(t, err)
	bad := func(mod func(m map[string]any)) string {
		m := map[string]any{"syncEventStart": good.SyncEventStart, "syncEventCount": good.SyncEventCount, "payload": good.Payload, "payloadAuth": good.PayloadAuth}
		mod(m)
		b, err := json.Marshal([]any{m})
		require.NoError(t, err)
		return string(b)
	}
	for name, body := range map[string]string{
		"NUL in payload":         bad(func(m map[string]any) { m["payload"] = "01\x0000" }),
		"not hex":                bad(func(m map[string]any) { m["payload"] = "zz" }),
		"huge start":             strings.Replace(bad(func(m map[string]any) {}), `"syncEventStart":8`, `"syncEventStart":1e300`, 1),
		"start beyond int64":     strings.Replace(bad(func(m map[string]any) {}), `"syncEventStart":8`, `"syncEventStart":18446744073709551615`, 1),
		"negative count":         bad(func(m map[string]any) { m["syncEventCount"] = -1 }),
		"count a string":         bad(func(m map[string]any) { m["syncEventCount"] = "1" }),
		"payload a number":       bad(func(m map[string]any) { m["payload"] = 7 }),
		"wrong count":            bad(func(m map[string]any) { m["syncEventCount"] = 2 }),
		"bad signature":          bad(func(m map[string]any) { m["payloadAuth"] = "00" + strings.Repeat("AB", 32) }),
		"another tower's batch":  bad(func(m map[string]any) { m["payload"], m["payloadAuth"] = other.Payload, other.PayloadAuth }),
		"count 0 with a payload": bad(func(m map[string]any) { m["syncEventCount"] = 0 }),
		"an object":              `{"syncEventStart": 1}`,
		"too many batches":       "[" + strings.TrimSuffix(strings.Repeat(`{"syncEventStart":0,"syncEventCount":0,"payload":"","payloadAuth":""},`, 65), ",") + "]",
	} {
		r := e.Do(http.MethodPost, "/sdk/v1/towers/"+tw.Upper+"/events", tok, body)
		assert.True(t, r.Status >= 400 && r.Status < 500, "%s: %d %s", name, r.Status, r.Body)
		requireProblem(t, r, r.Status)
	}
	var n int
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM tower_events WHERE tower_id = $1`, tw.ID).Scan(&n))
	assert.Equal(t, 6, n, "nothing of the refused uploads was stored")

	o := e.NewOtherOrg(t)
	requireProblem(t, e.Do(http.MethodPost, "/sdk/v1/towers/"+o.TowerID+"/events", tok, `[]`), http.StatusNotFound)
}

func TestSDKResetEvents(t *testing.T) {
	t.Parallel()
	e, tw, tok := startSDKTower(t, "01000000000000b2", 1)
	path := "/sdk/v1/towers/" + tw.Upper + "/reset-events"

	r := e.Do(http.MethodPost, path, tok, map[string]any{"reason": "event log corrupted"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, []string{"accessModeId", "description", "id", "isForTest", "locationId", "name", "pinCode", "systemId", "towerModelId"}, keys(r.Map(t)))
	var tower struct {
		ID           *string `json:"id"`
		Name         *string `json:"name"`
		Description  *string `json:"description"`
		SystemID     *int64  `json:"systemId"` // a number in Harbor's SDK model
		TowerModelID *int    `json:"towerModelId"`
		LocationID   *int64  `json:"locationId"`
		PinCode      *string `json:"pinCode"`
		AccessModeID *int    `json:"accessModeId"`
		IsForTest    *bool   `json:"isForTest"`
	}
	r.JSON(t, &tower)
	assert.Equal(t, tw.ID, *tower.ID)
	assert.Equal(t, "Tower "+tw.ID, *tower.Name)
	assert.Equal(t, locationID(t, e, towerUnion1), *tower.LocationID)
	assert.Equal(t, e.Creds.OrganizationID, *tower.SystemID)
	assert.NotEmpty(t, *tower.PinCode)
	assert.True(t, *tower.IsForTest)

	// A retry of the same report is the same reset; operators see one.
	require.Equal(t, http.StatusOK, e.Do(http.MethodPost, path, tok, map[string]any{"reason": "event log corrupted"}).Status)
	resets, err := e.Store.EventsResets(context.Background(), tw.ID, 10)
	require.NoError(t, err)
	require.Len(t, resets, 1)
	assert.Equal(t, 1, resets[0].Repeats)
	assert.Equal(t, "event log corrupted", resets[0].Reason)
	assert.Equal(t, e.Creds.ServiceProvider.ClientID, resets[0].ClientID)
	require.Equal(t, http.StatusOK, e.Do(http.MethodPost, path, tok, map[string]any{"reason": "battery swap"}).Status)
	resets, err = e.Store.EventsResets(context.Background(), tw.ID, 10)
	require.NoError(t, err)
	assert.Len(t, resets, 2)

	for name, body := range map[string]string{
		"NUL":        `{"reason": "a\u0000b"}`,
		"too long":   `{"reason": "` + strings.Repeat("x", 1001) + `"}`,
		"a number":   `{"reason": 5}`,
		"not JSON":   `reason`,
		"empty body": ``,
	} {
		r := e.Do(http.MethodPost, path, tok, body)
		assert.True(t, r.Status >= 400 && r.Status < 500, "%s: %d %s", name, r.Status, r.Body)
		requireProblem(t, r, r.Status)
	}
	o := e.NewOtherOrg(t)
	requireProblem(t, e.Do(http.MethodPost, "/sdk/v1/towers/"+o.TowerID+"/reset-events", tok, map[string]any{"reason": "x"}), http.StatusNotFound)
	requireProblem(t, e.Do(http.MethodPost, path, "", map[string]any{"reason": "x"}), http.StatusUnauthorized)
}
