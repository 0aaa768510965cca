package apiserver

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/towerproto"
)

// Command batching: a batch is a handful of BLE writes; one answer carries at most
// maxCommandBatches of them, the rest follow at the next sync.
const (
	commandsPerBatch  = 64
	maxCommandBatches = 16
)

// CommandBatchBody is one signed batch of commands for a tower, as the SDK pushes it over BLE.
type CommandBatchBody struct {
	TowerID          string `json:"towerId" doc:"The tower id exactly as the path gave it"`
	SyncCommandStart int64  `json:"syncCommandStart" doc:"Number of the batch's first command"`
	SyncCommandCount int    `json:"syncCommandCount" doc:"Number of commands in the batch"`
	Payload          string `json:"payload" doc:"Even-length hex: the commands, signed for the tower (docs/decisions/0008)"`
	PayloadAuth      string `json:"payloadAuth" doc:"Even-length hex: 00 + HMAC-SHA256 of the payload with the tower's command key"`
}

// TowerConfigurationBody is a tower's full signed state, for a new or reset tower.
type TowerConfigurationBody struct {
	TowerID  string   `json:"towerId" doc:"The tower id exactly as the path gave it"`
	Commands []string `json:"commands" doc:"Command packets, each even-length hex of payload ‖ authenticator"`
}

func (s *Server) registerSDKCommands(api huma.API) {
	huma.Register(api, op(huma.Operation{
		OperationID: "list-tower-commands", Method: http.MethodGet, Path: "/sdk/v1/towers/{tower_id}/commands", Tags: []string{sdkTag},
		Summary: "Commands a tower has not applied yet",
		Description: "The tower's numbered command log from the first command it has not reported applied (in a sync_commands event), " +
			"oldest first, in signed batches: generation floors (a token of an ended possession or of a locker taken out of service " +
			"is refused from then on), service states, and the acknowledgement of the events the cloud has stored. `[]` when there are none.",
		Security: needs(jwtauth.ScopeTowerAccess),
	}), s.listTowerCommands)
	huma.Register(api, op(huma.Operation{
		OperationID: "get-tower-configuration", Method: http.MethodGet, Path: "/sdk/v1/towers/{tower_id}/configuration", Tags: []string{sdkTag},
		Summary: "The full signed state of a tower",
		Description: "For a new or reset tower: every locker's generation floor and service state and how far its events are stored, " +
			"as of a position in the command log, as signed command packets. Later commands come from GET .../commands. " +
			"404 when the tower has no configuration yet (no lockers).",
		Security: needs(jwtauth.ScopeTowerAccess),
	}), s.getTowerConfiguration)
}

func storeCommand(c store.TowerCommand) (towerproto.Command, error) {
	kind, err := towerproto.ParseCommandKind(c.Kind)
	if err != nil {
		return towerproto.Command{}, fmt.Errorf("command %d: %w", c.Number, err)
	}
	return towerproto.Command{Kind: kind, Arg1: uint64(c.Arg1), Arg2: uint64(c.Arg2)}, nil
}

// listTowerCommands answers GET /sdk/v1/towers/{tower_id}/commands.
func (s *Server) listTowerCommands(ctx context.Context, in *TowerPath) (*struct{ Body []CommandBatchBody }, error) {
	pathTowerID := in.TowerID
	p := principal(ctx)
	tower, secret, err := s.tower(ctx, p.OrgID, pathTowerID)
	if err != nil {
		return nil, s.sdkError(ctx, "tower", err)
	}
	cmds, err := s.deps.Store.PendingCommands(ctx, tower.ID, commandsPerBatch*maxCommandBatches)
	if err != nil {
		return nil, s.sdkError(ctx, "commands", err)
	}
	key := towerproto.CommandKey(secret)
	expires := time.Now().Add(s.sdk.CommandTTL)
	out := []CommandBatchBody{}
	for chunk := range slices.Chunk(cmds, commandsPerBatch) {
		b := towerproto.CommandBatch{TowerID: tower.ID, Number: uint64(chunk[0].Number), ExpiresAt: expires}
		for _, c := range chunk {
			pc, err := storeCommand(c)
			if err != nil {
				return nil, s.sdkError(ctx, "commands", err)
			}
			b.Commands = append(b.Commands, pc)
		}
		payload, auth, err := towerproto.EncodeCommands(b, key)
		if err != nil {
			return nil, s.sdkError(ctx, "commands", err)
		}
		out = append(out, CommandBatchBody{TowerID: pathTowerID, SyncCommandStart: chunk[0].Number, SyncCommandCount: len(chunk),
			Payload: hex.EncodeToString(payload), PayloadAuth: hex.EncodeToString(auth)})
	}
	s.sdkMetrics.commands.Add(float64(len(cmds)))
	return &struct{ Body []CommandBatchBody }{Body: out}, nil
}

// getTowerConfiguration answers GET /sdk/v1/towers/{tower_id}/configuration.
func (s *Server) getTowerConfiguration(ctx context.Context, in *TowerPath) (*struct{ Body TowerConfigurationBody }, error) {
	pathTowerID := in.TowerID
	p := principal(ctx)
	tower, secret, err := s.tower(ctx, p.OrgID, pathTowerID)
	if err != nil {
		return nil, s.sdkError(ctx, "tower", err)
	}
	cfg, err := s.deps.Store.TowerConfiguration(ctx, tower.ID)
	if err != nil {
		return nil, s.sdkError(ctx, "configuration", err)
	}
	if len(cfg.Lockers) == 0 {
		return nil, s.sdkError(ctx, "configuration", errNotFound("tower "+tower.ID+" has no configuration yet: it has no lockers"))
	}
	var cmds []towerproto.Command
	for _, l := range cfg.Lockers {
		state := uint64(0)
		if l.OutOfService {
			state = 1
		}
		cmds = append(cmds,
			towerproto.Command{Kind: towerproto.CommandGenerationFloor, Arg1: uint64(l.LockerID), Arg2: uint64(l.Generation)},
			towerproto.Command{Kind: towerproto.CommandServiceState, Arg1: uint64(l.LockerID), Arg2: state})
	}
	if cfg.HasEventsStore {
		cmds = append(cmds, towerproto.Command{Kind: towerproto.CommandEventsAck, Arg1: uint64(cfg.AckEpoch), Arg2: uint64(cfg.AckThrough)})
	}
	key := towerproto.CommandKey(secret)
	expires := time.Now().Add(s.sdk.CommandTTL)
	out := TowerConfigurationBody{TowerID: pathTowerID, Commands: []string{}}
	for chunk := range slices.Chunk(cmds, commandsPerBatch) {
		payload, auth, err := towerproto.EncodeCommands(towerproto.CommandBatch{TowerID: tower.ID, Number: uint64(cfg.Position),
			Snapshot: true, ExpiresAt: expires, Commands: chunk}, key)
		if err != nil {
			return nil, s.sdkError(ctx, "configuration", err)
		}
		out.Commands = append(out.Commands, hex.EncodeToString(append(payload, auth...)))
	}
	return &struct{ Body TowerConfigurationBody }{Body: out}, nil
}
