// Package towerproto holds the wire formats shared by the cloud, a locker tower and the
// mobile SDK between them:
//
//   - the locker token a tower verifies offline (payload / payload_auth, DESIGN §4.5);
//   - the signed event batch a tower hands to the SDK for upload (DESIGN §4.7), including the
//     sync_commands event that reports the commands a tower applied;
//   - the session a tower accepts from the cloud through a phone (sealed for that tower,
//     DESIGN §4.8), its claims and permissions, and the BLE channel the phone and the tower
//     build from it (the handshake keys as Harbor's SDK derives them);
//   - the signed command batches the cloud sends a tower through the SDK (generation floors,
//     service state, acknowledgement of stored events).
//
// Tokens, batches and commands are a version byte followed by fixed-width big-endian fields,
// written as lower-case hex (either case is read back), with a separate authenticator: one
// key-version byte (0x00) followed by HMAC-SHA256 over the raw payload bytes. Sessions are
// AES-256-GCM under their own key. Every key is derived from the tower's secret with
// HKDF-SHA256 (no salt) under its own label ("locker-token", "tower-event", "tower-session",
// "tower-command"), so no key can stand in for another. docs/decisions/0006 and 0008 give the
// layouts and the reasons.
//
// Decoders treat every input as hostile: they never panic, check the MAC (in constant time)
// before trusting any field, and report failures through the sentinel errors ErrMalformed,
// ErrBadMAC and ErrVersion.
package towerproto
