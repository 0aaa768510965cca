package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Command kinds of a tower's command log (DESIGN §4.8; towerproto.CommandKind names them).
const (
	CommandGenerationFloor = "generation_floor" // Arg1 locker, Arg2 generation
	CommandServiceState    = "service_state"    // Arg1 locker, Arg2 1 out of service / 0 in service
	CommandEventsAck       = "events_ack"       // Arg1 boot epoch, Arg2 last stored sequence number
)

// TowerCommand is one numbered entry of a tower's command log.
type TowerCommand struct {
	Number    int64
	Kind      string
	Arg1      int64
	Arg2      int64
	CreatedAt time.Time
}

// newCommand is a command to append; the log numbers it.
type newCommand struct {
	kind       string
	arg1, arg2 int64
}

func floorCommand(lockerID int64, generation int32) newCommand {
	return newCommand{kind: CommandGenerationFloor, arg1: lockerID, arg2: int64(generation)}
}

func serviceCommand(lockerID int64, outOfService bool) newCommand {
	c := newCommand{kind: CommandServiceState, arg1: lockerID}
	if outOfService {
		c.arg2 = 1
	}
	return c
}

// appendCommandsSQL appends commands to a tower's log in one statement: it takes the next
// numbers from the head row (locking it until the transaction ends) and writes the commands.
// $1 tower, $2 kinds, $3 arg1s, $4 arg2s. Callers lock the head last, after every locker row
// they touch, so two transactions never wait on each other in opposite orders.
const appendCommandsSQL = `
	WITH c AS (SELECT * FROM unnest($2::text[], $3::bigint[], $4::bigint[]) WITH ORDINALITY AS c (kind, arg1, arg2, ord)),
	head AS (
	    INSERT INTO tower_command_heads (tower_id, head) SELECT $1, count(*) FROM c
	    ON CONFLICT (tower_id) DO UPDATE SET head = tower_command_heads.head + excluded.head
	    RETURNING head
	)
	INSERT INTO tower_commands (tower_id, number, kind, arg1, arg2)
	SELECT $1, head.head - (SELECT count(*) FROM c) + c.ord, c.kind, c.arg1, c.arg2 FROM head, c`

func commandArgs(towerID string, cmds []newCommand) []any {
	kinds := make([]string, len(cmds))
	a1 := make([]int64, len(cmds))
	a2 := make([]int64, len(cmds))
	for i, c := range cmds {
		kinds[i], a1[i], a2[i] = c.kind, c.arg1, c.arg2
	}
	return []any{strings.ToLower(towerID), kinds, a1, a2}
}

// appendCommands writes commands to the tower's log, numbered in order, inside the caller's
// transaction. Call it after every locker row of the transaction is locked.
func (s *Store) appendCommands(ctx context.Context, towerID string, cmds []newCommand) error {
	if len(cmds) == 0 {
		return nil
	}
	if _, err := s.db.Exec(ctx, appendCommandsSQL, commandArgs(towerID, cmds)...); err != nil {
		return fmt.Errorf("append tower commands: %w", translate(err))
	}
	return nil
}

// PendingCommands returns the tower's commands it has not reported applied, oldest first, at
// most limit of them.
func (s *Store) PendingCommands(ctx context.Context, towerID string, limit int) ([]TowerCommand, error) {
	return listRows(ctx, s, "pending commands", func(r pgx.CollectableRow) (TowerCommand, error) {
		var c TowerCommand
		return c, r.Scan(&c.Number, &c.Kind, &c.Arg1, &c.Arg2, &c.CreatedAt)
	}, `
		SELECT c.number, c.kind, c.arg1, c.arg2, c.created_at
		FROM tower_commands c
		WHERE c.tower_id = $1 AND c.number > coalesce((SELECT acked FROM tower_command_heads WHERE tower_id = $1), 0)
		ORDER BY c.number LIMIT $2`, strings.ToLower(towerID), limit)
}

// CommandLogState is where a tower's command log stands.
type CommandLogState struct {
	Head    int64 // the last command number written
	Acked   int64 // the last command number the tower reported applied
	AckedAt *time.Time
}

// CommandLog returns where a tower's command log stands (zeros before its first command).
func (s *Store) CommandLog(ctx context.Context, towerID string) (CommandLogState, error) {
	var st CommandLogState
	err := s.db.QueryRow(ctx, `SELECT head, acked, acked_at FROM tower_command_heads WHERE tower_id = $1`,
		strings.ToLower(towerID)).Scan(&st.Head, &st.Acked, &st.AckedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return CommandLogState{}, nil
	}
	if err != nil {
		return CommandLogState{}, fmt.Errorf("get command log: %w", translate(err))
	}
	return st, nil
}

// LockerConfig is one locker in a tower's configuration.
type LockerConfig struct {
	LockerID     int64
	Generation   int32
	OutOfService bool
}

// TowerConfiguration is the full state a new or reset tower must learn, as of command number
// Position of its log: every locker's generation floor and service state, and how far the
// cloud has stored the events of the tower's latest boot epoch.
type TowerConfiguration struct {
	Position       int64
	Lockers        []LockerConfig
	AckEpoch       int64
	AckThrough     int64 // 0: no events stored yet
	HasEventsStore bool
}

// TowerConfiguration reads a tower's configuration in one statement, so the state and the
// log position it corresponds to come from the same snapshot (the commands of a change are
// written in the change's transaction).
func (s *Store) TowerConfiguration(ctx context.Context, towerID string) (TowerConfiguration, error) {
	var c TowerConfiguration
	var ids []int64
	var gens []int32
	var out []bool
	var ackEpoch, ackThrough *int64
	err := s.db.QueryRow(ctx, `
		SELECT coalesce((SELECT head FROM tower_command_heads WHERE tower_id = $1), 0),
		       array(SELECT id FROM lockers WHERE tower_id = $1 ORDER BY id),
		       array(SELECT generation FROM lockers WHERE tower_id = $1 ORDER BY id),
		       array(SELECT status = `+outOfServiceSQL+` FROM lockers WHERE tower_id = $1 ORDER BY id),
		       a.boot_epoch, a.stored_through
		FROM (SELECT 1) one
		LEFT JOIN LATERAL (SELECT boot_epoch, stored_through FROM tower_event_acks
		                   WHERE tower_id = $1 AND stored_through > 0 ORDER BY boot_epoch DESC LIMIT 1) a ON true`,
		strings.ToLower(towerID)).Scan(&c.Position, &ids, &gens, &out, &ackEpoch, &ackThrough)
	if err != nil {
		return TowerConfiguration{}, fmt.Errorf("read tower configuration: %w", translate(err))
	}
	for i := range ids {
		c.Lockers = append(c.Lockers, LockerConfig{LockerID: ids[i], Generation: gens[i], OutOfService: out[i]})
	}
	if ackEpoch != nil && ackThrough != nil {
		c.AckEpoch, c.AckThrough, c.HasEventsStore = *ackEpoch, *ackThrough, true
	}
	return c, nil
}

// recordCommandsApplied notes the highest command number a tower reported applied (it never
// moves back, and never past the head).
func (s *Store) recordCommandsApplied(ctx context.Context, towerID string, number int64) error {
	return s.exec(ctx, "record applied commands", `
		UPDATE tower_command_heads SET acked = least(head, $2), acked_at = now()
		WHERE tower_id = $1 AND acked < least(head, $2)`, towerID, number)
}

// ackStoredEvents advances how far the tower's events of an epoch are stored without a gap
// and, when that now covers an event other than sync_commands, appends an events_ack command
// (the tower may then forget them). An acknowledgement for sync_commands events alone would
// make the tower report applying it in another sync_commands event, and so on forever; those
// are acknowledged with the next real event instead (until then the SDK uploads them again
// and they count as duplicates).
func (s *Store) ackStoredEvents(ctx context.Context, towerID string, epoch int64) (*newCommand, error) {
	var stored, acked int64
	err := s.db.QueryRow(ctx, `
		INSERT INTO tower_event_acks (tower_id, boot_epoch) VALUES ($1, $2)
		ON CONFLICT (tower_id, boot_epoch) DO UPDATE SET stored_through = tower_event_acks.stored_through
		RETURNING stored_through, acked_through`, towerID, epoch).Scan(&stored, &acked)
	if err != nil {
		return nil, fmt.Errorf("lock event acknowledgement: %w", translate(err))
	}
	var through int64
	err = s.db.QueryRow(ctx, `
		SELECT coalesce(min(e.seq), $3) FROM tower_events e
		WHERE e.tower_id = $1 AND e.boot_epoch = $2 AND e.seq > $3
		  AND EXISTS (SELECT 1 FROM tower_events f WHERE f.tower_id = $1 AND f.boot_epoch = $2 AND f.seq = $3 + 1)
		  AND NOT EXISTS (SELECT 1 FROM tower_events n WHERE n.tower_id = $1 AND n.boot_epoch = $2 AND n.seq = e.seq + 1)`,
		towerID, epoch, stored).Scan(&through)
	if err != nil {
		return nil, fmt.Errorf("find stored events: %w", translate(err))
	}
	if through == stored {
		return nil, nil
	}
	var real bool
	err = s.db.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM tower_events WHERE tower_id = $1 AND boot_epoch = $2 AND seq > $3 AND seq <= $4
		               AND kind <> 'sync_commands')`, towerID, epoch, acked, through).Scan(&real)
	if err != nil {
		return nil, fmt.Errorf("find stored events: %w", translate(err))
	}
	newAcked := acked
	if real {
		newAcked = through
	}
	if _, err := s.db.Exec(ctx, `UPDATE tower_event_acks SET stored_through = $3, acked_through = $4 WHERE tower_id = $1 AND boot_epoch = $2`,
		towerID, epoch, through, newAcked); err != nil {
		return nil, fmt.Errorf("record stored events: %w", translate(err))
	}
	if !real {
		return nil, nil
	}
	return &newCommand{kind: CommandEventsAck, arg1: epoch, arg2: through}, nil
}
