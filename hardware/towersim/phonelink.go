package towersim

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/lockernet/lockernet/internal/towerproto"
)

// PhoneLink is the phone's end of a BLE link with a tower.
type PhoneLink struct {
	r      *Relay
	t      *Tower
	link   *Link
	keys   towerproto.ChannelKeys
	seq    uint64
	bearer string
}

// Connect opens a BLE link to the tower with a session of the claim: the session (cached or
// from the cloud), then the handshake.
func (r *Relay) Connect(ctx context.Context, t *Tower, claim, bearer string) (*PhoneLink, error) {
	payload, auth, seed, err := r.Session(ctx, t, claim, bearer)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, towerproto.NonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("request nonce: %w", err)
	}
	link, reply, err := t.Connect(strings.ToUpper(payload), strings.ToUpper(auth), nonce)
	if err != nil {
		if errors.Is(err, ErrInvalidSession) {
			r.mu.Lock()
			delete(r.cache, sessionKey{t.id, claim})
			r.mu.Unlock()
		}
		return nil, err
	}
	_, keys, err := towerproto.OpenGrant(seed, nonce, reply)
	if err != nil {
		return nil, fmt.Errorf("%w: the grant does not open with the session seed: %w", ErrInvalidSession, err)
	}
	return &PhoneLink{r: r, t: t, link: link, keys: keys, bearer: bearer}, nil
}

// Link returns the tower's end (the simulator sets the physical door on it).
func (p *PhoneLink) Link() *Link { return p.link }

// Close ends the session on the link.
func (p *PhoneLink) Close() {
	_, _ = p.send(context.Background(), Message{Type: towerproto.MsgTerminate})
}

// send seals a message, lets the tower answer it and opens the answer. A refusal of the
// tower comes back as an error wrapping its *Refusal.
func (p *PhoneLink) send(ctx context.Context, m Message) (Message, error) {
	p.seq++
	m.Seq = p.seq
	packet, auth, err := towerproto.SealPacket(p.keys, m, rand.Reader)
	if err != nil {
		return Message{}, fmt.Errorf("seal message: %w", err)
	}
	ans, ansAuth, err := p.link.Exchange(ctx, packet, auth)
	if err != nil {
		return Message{}, err
	}
	var out Message
	if err := towerproto.OpenPacket(p.keys, ans, ansAuth, &out); err != nil {
		return Message{}, fmt.Errorf("open the tower's answer: %w", err)
	}
	if out.Seq != m.Seq {
		return Message{}, fmt.Errorf("the tower answered message %d to message %d", out.Seq, m.Seq)
	}
	if out.Type == towerproto.MsgError {
		for _, ref := range refusals {
			if ref.Code == out.Code {
				return out, fmt.Errorf("%w: %s", ref, out.Message)
			}
		}
		return out, fmt.Errorf("tower error %s: %s", out.Code, out.Message)
	}
	return out, nil
}

// OpenWithToken presents a locker token over the link.
func (p *PhoneLink) OpenWithToken(ctx context.Context, payloadHex, authHex string) (Message, error) {
	pl, err1 := towerproto.DecodeHex(payloadHex, 1024)
	au, err2 := towerproto.DecodeHex(authHex, 64)
	if err := errors.Join(err1, err2); err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	return p.send(ctx, Message{Type: towerproto.MsgOpenWithToken, Payload: pl, PayloadAuth: au})
}

// MaintenanceOpen opens a locker without a token (a technician's session).
func (p *PhoneLink) MaintenanceOpen(ctx context.Context, lockerID int64) (Message, error) {
	return p.send(ctx, Message{Type: towerproto.MsgMaintenanceOpen, LockerID: lockerID})
}

// UploadEvents pulls the tower's events not yet uploaded and sends them to the cloud, at most
// batchesPerRequest batches a request; with nothing to send it still uploads the empty pull
// once, as the SDK does. It returns how many events the cloud took as new.
func (p *PhoneLink) UploadEvents(ctx context.Context) (int, error) {
	p.t.uploadMu.Lock()
	defer p.t.uploadMu.Unlock()
	status, err := p.send(ctx, Message{Type: towerproto.MsgSyncStatus})
	if err != nil {
		return 0, fmt.Errorf("sync status: %w", err)
	}
	accepted := 0
	var epoch uint32
	var start uint64
	for round := 0; ; round++ {
		var envs []towerproto.BatchEnvelope
		var events []LoggedEvent
		for len(envs) < batchesPerRequest {
			ans, err := p.send(ctx, Message{Type: towerproto.MsgSyncPull, BootEpoch: epoch, SyncEventStart: start})
			if err != nil {
				return accepted, fmt.Errorf("pull events: %w", err)
			}
			if ans.SyncEventCount == 0 {
				if round == 0 && len(envs) == 0 {
					envs = append(envs, envelope(ans))
				}
				break
			}
			envs = append(envs, envelope(ans))
			for i := range ans.SyncEventCount {
				events = append(events, LoggedEvent{BootEpoch: ans.BootEpoch, Event: towerproto.Event{Seq: ans.SyncEventStart + uint64(i)}})
			}
			epoch, start = ans.BootEpoch, ans.SyncEventStart+uint64(ans.SyncEventCount)
		}
		if len(envs) == 0 {
			break
		}
		resp, err := p.r.post(ctx, p.t.id, envs, p.bearer)
		if err != nil {
			return accepted, fmt.Errorf("upload events: %w", err)
		}
		accepted += resp.Accepted
		if len(events) == 0 {
			break
		}
		if err := p.t.markUploaded(events); err != nil {
			// The cloud has the events; at worst they are sent again after a restart and
			// counted as duplicates.
			p.r.logger.Error("record upload", "tower", p.t.id, "error", err)
		}
		p.r.logger.Info("events uploaded", "tower", p.t.id, "events", len(events), "accepted", resp.Accepted,
			"duplicates", resp.Duplicates, "towerEventsUnacknowledged", status.SyncEventCount)
	}
	return accepted, nil
}

func envelope(m Message) towerproto.BatchEnvelope {
	return towerproto.BatchEnvelope{SyncEventStart: m.SyncEventStart, SyncEventCount: m.SyncEventCount,
		Payload: strings.ToUpper(hex.EncodeToString(m.Payload)), PayloadAuth: strings.ToUpper(hex.EncodeToString(m.PayloadAuth))}
}

// SyncCommands pulls the commands the tower has not applied from the cloud and pushes them;
// when the tower has fallen behind the log (new or reset) it pushes the tower's
// configuration first. It returns how many commands the tower applied.
//
// At its first sync with each tower, and whenever the cloud's pending commands all number
// below the tower's position, the phone also checks that the cloud's command log has reached
// the tower's position (checkLog): a log behind the tower means the cloud's database was
// re-created or restored since the tower last synced. (A log replaced while the phone keeps
// syncing can also leave nothing pending; CheckLog after a stale_generation refusal covers
// that.)
func (p *PhoneLink) SyncCommands(ctx context.Context) (int, error) {
	var batches []struct {
		TowerID          string `json:"towerId"`
		SyncCommandStart int64  `json:"syncCommandStart"`
		SyncCommandCount int    `json:"syncCommandCount"`
		Payload          string `json:"payload"`
		PayloadAuth      string `json:"payloadAuth"`
	}
	p.t.commandsMu.Lock()
	defer p.t.commandsMu.Unlock()
	status, err := p.send(ctx, Message{Type: towerproto.MsgSyncStatus})
	if err != nil {
		return 0, fmt.Errorf("sync status: %w", err)
	}
	applied := 0
	position := status.SyncCommandStart - 1 // the last command the tower applied
	if status.SyncCommandStart <= 1 {
		// A new or reset tower has applied nothing: its full state first (none yet: 404).
		n, err := p.configure(ctx)
		var se *StatusError
		if err != nil && !(errors.As(err, &se) && se.StatusCode == http.StatusNotFound) {
			return n, err
		}
		applied += n
		position = 0
		p.r.logChecked.Store(p.t.id, true) // whatever the tower knows now, this cloud told it
	}
	if err := p.r.call(ctx, http.MethodGet, "/sdk/v1/towers/"+upperID(p.t.id)+"/commands", p.bearer, nil, &batches); err != nil {
		return applied, fmt.Errorf("get commands: %w", err)
	}
	_, checked := p.r.logChecked.Load(p.t.id)
	if position > 0 && (!checked || len(batches) > 0 &&
		uint64(batches[len(batches)-1].SyncCommandStart)+uint64(batches[len(batches)-1].SyncCommandCount)-1 < position) {
		n, _, err := p.checkLog(ctx, position)
		applied += n
		if err != nil {
			return applied, err
		}
	}
	for i := 0; i < len(batches); i++ {
		b := batches[i]
		pl, err1 := hex.DecodeString(b.Payload)
		au, err2 := hex.DecodeString(b.PayloadAuth)
		if err := errors.Join(err1, err2); err != nil {
			return applied, fmt.Errorf("decode command batch: %w", err)
		}
		ans, err := p.send(ctx, Message{Type: towerproto.MsgSyncPush, Payload: pl, PayloadAuth: au})
		if err != nil && ans.Code == "command_gap" && i == 0 {
			n, err := p.configure(ctx)
			applied += n
			if err != nil {
				return applied, err
			}
			ans, err = p.send(ctx, Message{Type: towerproto.MsgSyncPush, Payload: pl, PayloadAuth: au})
			if err != nil {
				return applied, fmt.Errorf("push commands after the configuration: %w", err)
			}
		} else if err != nil {
			return applied, fmt.Errorf("push commands: %w", err)
		}
		applied += ans.Applied
	}
	return applied, nil
}

// checkLog compares the cloud's command log with the tower's position. The configuration
// says where the log stands; the tower's position was read first, and the log never shrinks,
// so a configuration behind the tower means the log went back (the cloud's database was
// re-created or restored). Then the phone pushes the configuration, the tower checks it is
// newer than every command it applied and resyncs (Tower.applyCommandsLocked), and the phone
// reports the tower's event-log reset to the cloud, as the SDK reports a reset. In the normal
// case the configuration is only read. It returns how many commands the tower applied and
// whether it resynced. The caller holds p.t.commandsMu.
func (p *PhoneLink) checkLog(ctx context.Context, position uint64) (applied int, resynced bool, err error) {
	conf, err := p.configuration(ctx)
	var se *StatusError
	if errors.As(err, &se) && se.StatusCode == http.StatusNotFound {
		// The cloud knows no lockers of the tower: nothing to compare with.
		p.r.logger.Warn("the cloud has no configuration for the tower; its command log cannot be checked",
			"tower", p.t.id, "towerPosition", position)
		p.r.logChecked.Store(p.t.id, true)
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("check the cloud's command log: %w", err)
	}
	if len(conf) == 0 {
		return 0, false, errors.New("check the cloud's command log: a configuration without packets")
	}
	cloudPosition, err := snapshotPosition(conf[0])
	if err != nil {
		return 0, false, fmt.Errorf("check the cloud's command log: %w", err)
	}
	p.r.logChecked.Store(p.t.id, true)
	if cloudPosition >= position {
		return 0, false, nil
	}
	p.r.logger.Warn("the cloud's command log is behind the tower (its database was re-created or restored); "+
		"pushing the cloud's configuration so the tower can resync", "tower", p.t.id, "towerPosition", position,
		"cloudPosition", cloudPosition)
	reason := ""
	for _, pkt := range conf {
		ans, err := p.send(ctx, Message{Type: towerproto.MsgConfigure, Packet: pkt})
		if err != nil {
			return applied, reason != "", fmt.Errorf("push configuration: %w", err)
		}
		applied += ans.Applied
		if ans.Resynced {
			reason = ans.Message
		}
	}
	if reason == "" {
		p.r.logger.Warn("the tower kept its state: the cloud's configuration is not newer than the commands it applied",
			"tower", p.t.id, "towerPosition", position, "cloudPosition", cloudPosition)
		return applied, false, nil
	}
	var tower map[string]any
	if err := p.r.call(ctx, http.MethodPost, "/sdk/v1/towers/"+upperID(p.t.id)+"/reset-events", p.bearer,
		map[string]any{"reason": reason}, &tower); err != nil {
		// The tower has resynced either way; only the operators' record is missing.
		p.r.logger.Warn("tower resynced; reporting its event-log reset to the cloud failed", "tower", p.t.id, "error", err)
		return applied, true, nil
	}
	p.r.logger.Warn("tower resynced from the cloud's configuration; reported its event-log reset to the cloud",
		"tower", p.t.id, "cloudPosition", cloudPosition, "droppedCommandPosition", position, "reason", reason)
	return applied, true, nil
}

// CheckLog compares the cloud's command log with the tower's position now (see checkLog),
// as the phone does after the tower refused a token as stale: a token the cloud has just
// issued is refused so only when the tower's floor is ahead of the cloud. It returns how many
// commands the tower applied and whether it resynced.
func (p *PhoneLink) CheckLog(ctx context.Context) (applied int, resynced bool, err error) {
	p.t.commandsMu.Lock()
	defer p.t.commandsMu.Unlock()
	status, err := p.send(ctx, Message{Type: towerproto.MsgSyncStatus})
	if err != nil {
		return 0, false, fmt.Errorf("sync status: %w", err)
	}
	if status.SyncCommandStart <= 1 {
		return 0, false, nil // the tower has applied nothing the cloud could be behind
	}
	return p.checkLog(ctx, status.SyncCommandStart-1)
}

// configure pushes the tower's full configuration from the cloud.
func (p *PhoneLink) configure(ctx context.Context) (int, error) {
	conf, err := p.configuration(ctx)
	if err != nil {
		return 0, err
	}
	applied := 0
	for _, pkt := range conf {
		ans, err := p.send(ctx, Message{Type: towerproto.MsgConfigure, Packet: pkt})
		if err != nil {
			return applied, fmt.Errorf("push configuration: %w", err)
		}
		applied += ans.Applied
	}
	return applied, nil
}

// configuration gets the tower's configuration packets from the cloud.
func (p *PhoneLink) configuration(ctx context.Context) ([][]byte, error) {
	var conf struct {
		TowerID  string   `json:"towerId"`
		Commands []string `json:"commands"`
	}
	if err := p.r.call(ctx, http.MethodGet, "/sdk/v1/towers/"+upperID(p.t.id)+"/configuration", p.bearer, nil, &conf); err != nil {
		return nil, fmt.Errorf("get configuration: %w", err)
	}
	out := make([][]byte, 0, len(conf.Commands))
	for _, c := range conf.Commands {
		pkt, err := hex.DecodeString(c)
		if err != nil {
			return nil, fmt.Errorf("decode configuration: %w", err)
		}
		out = append(out, pkt)
	}
	return out, nil
}

// snapshotPosition reads the log position a configuration packet is signed as of, without
// verifying it: the phone has no command key, and only the tower acts on the packet after
// verifying it. The offsets are those of the command payload layout in towerproto
// (command.go): version, flags, tower id, then the position.
func snapshotPosition(packet []byte) (uint64, error) {
	const offFlags, offNumber, header = 1, 10, 28
	if len(packet) < header || packet[0] != towerproto.CommandVersion || packet[offFlags] != 0x01 {
		return 0, fmt.Errorf("read configuration position: not a version-%d configuration packet", towerproto.CommandVersion)
	}
	return binary.BigEndian.Uint64(packet[offNumber:]), nil
}

// ResetEvents resets the tower's event log over the link (a configure permission is needed)
// and reports it to the cloud.
func (p *PhoneLink) ResetEvents(ctx context.Context, reason string) error {
	if _, err := p.send(ctx, Message{Type: towerproto.MsgResetEvents}); err != nil {
		return fmt.Errorf("reset the tower's events: %w", err)
	}
	var tower map[string]any
	if err := p.r.call(ctx, http.MethodPost, "/sdk/v1/towers/"+upperID(p.t.id)+"/reset-events", p.bearer,
		map[string]any{"reason": reason}, &tower); err != nil {
		return fmt.Errorf("report the reset: %w", err)
	}
	return nil
}
