// Package towersim simulates a BLE locker tower together with the part of the mobile SDK
// that relays the tower's events to the cloud (DESIGN §4.5, §4.7, §9).
//
// A Tower verifies locker tokens offline with its own key, exactly as a real tower does,
// "opens" and closes the door, and records signed events. A Relay uploads those events to
// POST /api/v1/towers/{tower_id}/events and keeps every event until the cloud has taken it.
// A Simulator holds the towers of a provisioning file and serves the dev-only control API
// (POST /sim/towers/{tower_id}/open and friends). Nothing here is mounted by production
// binaries.
package towersim
