// Package towerproto holds the wire formats shared by the cloud and a locker tower: the
// locker token a tower verifies offline (payload / payload_auth, DESIGN §4.5) and the signed
// event batch a tower hands to the mobile SDK for upload (DESIGN §4.7).
//
// Both formats are a version byte followed by fixed-width big-endian fields, written as
// lower-case hex (either case is read back), with a separate authenticator: one key-version byte (0x00) followed by
// HMAC-SHA256 over the raw payload bytes. The HMAC keys are derived from the tower's secret
// with HKDF-SHA256 (no salt) under distinct labels, so a token key can never sign an event
// batch and the reverse.
//
// Decoders treat every input as hostile: they never panic, check the MAC (in constant time)
// before trusting any field, and report failures through the sentinel errors ErrMalformed,
// ErrBadMAC and ErrVersion.
package towerproto
