package gateway

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// logEntry is a row of the event log.
type logEntry struct {
	Timestamp time.Time
	Level     string
	Message   string
	Fields    map[string]any
}

func (s *store) appendLog(ctx context.Context, e logEntry) error {
	fields, err := json.Marshal(e.Fields)
	if err != nil || e.Fields == nil {
		fields = []byte("{}")
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO event_log (ts, level, message, fields) VALUES (?, ?, ?, ?)`,
		formatTime(e.Timestamp), e.Level, e.Message, string(fields))
	if err != nil {
		return fmt.Errorf("append log entry: %w", interpretError(err))
	}
	if id, err := res.LastInsertId(); err == nil && id%100 == 0 {
		if _, err := s.db.ExecContext(ctx, `
			DELETE FROM event_log WHERE coalesce(json_extract(fields, '$.category'), '') <> 'security' AND id < (
			    SELECT coalesce(min(id), 0) FROM (SELECT id FROM event_log WHERE coalesce(json_extract(fields, '$.category'), '') <> 'security'
			                                      ORDER BY id DESC LIMIT ?))`, keepLogEntries); err != nil {
			return fmt.Errorf("prune log: %w", interpretError(err))
		}
		if _, err := s.db.ExecContext(ctx, `
			DELETE FROM event_log WHERE json_extract(fields, '$.category') = 'security' AND id < (
			    SELECT coalesce(min(id), 0) FROM (SELECT id FROM event_log WHERE json_extract(fields, '$.category') = 'security'
			                                      ORDER BY id DESC LIMIT ?))`, keepSecurityEntries); err != nil {
			return fmt.Errorf("prune security log: %w", interpretError(err))
		}
	}
	return nil
}

// logs returns up to limit entries, newest first, and whether more matched.
func (s *store) logs(ctx context.Context, limit int) ([]logEntry, bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT ts, level, message, fields FROM event_log ORDER BY id DESC LIMIT ?`, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("query logs: %w", err)
	}
	defer rows.Close()
	var out []logEntry
	for rows.Next() {
		var (
			e      logEntry
			ts     string
			fields string
		)
		if err := rows.Scan(&ts, &e.Level, &e.Message, &fields); err != nil {
			return nil, false, fmt.Errorf("scan log entry: %w", err)
		}
		e.Timestamp = parseTime(ts)
		if err := json.Unmarshal([]byte(fields), &e.Fields); err != nil || e.Fields == nil {
			e.Fields = map[string]any{}
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("query logs: %w", err)
	}
	truncated := len(out) > limit
	if truncated {
		out = out[:limit]
	}
	return out, truncated, nil
}

// heartbeat is a device's last report.
type heartbeat struct {
	DeviceID   string
	Kind       string
	Status     string
	DeviceTime *time.Time
}

// recordHeartbeat stores a heartbeat and reports the previous status ("" when
// the device is new), so callers log only changes.
func (s *store) recordHeartbeat(ctx context.Context, hb heartbeat, now time.Time) (previous string, err error) {
	var deviceTime *string
	if hb.DeviceTime != nil {
		t := formatTime(*hb.DeviceTime)
		deviceTime = &t
	}
	err = s.withTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT status FROM device_heartbeats WHERE device_id = ?`, hb.DeviceID).Scan(&previous)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("get heartbeat: %w", err)
		}
		_, err = tx.ExecContext(ctx, `
INSERT INTO device_heartbeats (device_id, kind, status, device_time, received_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (device_id) DO UPDATE SET kind = excluded.kind, status = excluded.status,
	device_time = excluded.device_time, received_at = excluded.received_at`,
			hb.DeviceID, hb.Kind, hb.Status, deviceTime, formatTime(now))
		if err != nil {
			return fmt.Errorf("store heartbeat: %w", interpretError(err))
		}
		return nil
	})
	return previous, err
}
