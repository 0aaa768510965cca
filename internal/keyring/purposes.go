package keyring

import "github.com/google/uuid"

// The purposes secrets are sealed for, one per kind of secret and row: a sealed value opens
// only under the purpose it was sealed for, so a value copied to another row (or another
// kind of row) does not open.

// TowerSecretPurpose seals a tower's secret (its token and event keys derive from it).
func TowerSecretPurpose(towerID string) string { return "tower:" + towerID }

// GatewaySecretPurpose seals the bearer secret of a gateway's local API.
func GatewaySecretPurpose(serial string) string { return "gateway:" + serial }

// WebhookSecretPurpose seals a webhook endpoint's signing secret.
func WebhookSecretPurpose(endpointID uuid.UUID) string {
	return "webhook-secret:" + endpointID.String()
}

// AccessCodePurpose seals an access code's digits.
func AccessCodePurpose(codeID uuid.UUID) string { return "access-code:" + codeID.String() }

// OpenLinkPurpose seals a locker-open link's token.
func OpenLinkPurpose(linkID uuid.UUID) string { return "open-link:" + linkID.String() }
