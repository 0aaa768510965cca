// Package workflows holds the Temporal workflows: deterministic code only (no pgx, no
// net/http, no time.Now or rand). Each workflow is an exported function over a private
// implementation struct; its ID is built from the business id, so a repeated start finds
// the existing run instead of making a second one.
package workflows

import (
	"github.com/lockernet/lockernet/activities"
)

// a names the activities for ExecuteActivity and ExecuteLocalActivity (a.ExpireToken, ...):
// the workers' Activities run them; no method is ever called on this nil value.
var a *activities.Activities
