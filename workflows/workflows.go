// Package workflows holds the Temporal workflows: deterministic code only (no pgx, no
// net/http, no time.Now or rand). Each workflow is an exported function over a private
// implementation struct; its ID is built from the business id, so a repeated start finds
// the existing run instead of making a second one.
package workflows

import (
	"go.temporal.io/sdk/temporal"

	"github.com/lockernet/lockernet/activities"
)

// DefaultTaskQueue is the task queue the worker polls unless configured otherwise.
const DefaultTaskQueue = "lockernet"

// a names the activities for ExecuteActivity and ExecuteLocalActivity (a.ExpireToken, ...):
// the workers' Activities run them; no method is ever called on this nil value.
var a *activities.Activities

// Search attributes set on every workflow so operators can filter in the Temporal UI.
var (
	AttrOrganizationID = temporal.NewSearchAttributeKeyKeyword("OrganizationId")
	AttrLocationID     = temporal.NewSearchAttributeKeyKeyword("LocationId")
	AttrTowerID        = temporal.NewSearchAttributeKeyKeyword("TowerId")
	AttrLockerID       = temporal.NewSearchAttributeKeyKeyword("LockerId")
	AttrRequestKind    = temporal.NewSearchAttributeKeyKeyword("RequestKind")
)

// SearchAttributeNames lists the custom search attributes to register on a namespace.
var SearchAttributeNames = []string{
	AttrOrganizationID.GetName(), AttrLocationID.GetName(), AttrTowerID.GetName(),
	AttrLockerID.GetName(), AttrRequestKind.GetName(), AttrWebhookEndpointID.GetName(), AttrEventType.GetName(),
}
