// Package contract is the workflows' contract: each workflow's type name, ID builder, input
// and result types, signal and query names, the search attributes they carry and the
// revisions their inputs name. Whoever starts, signals or queries a workflow — the
// apiserver, the outbox, the store, the gateway-request executor, the tools — names it from
// here without linking the workflows' code or the activities behind it (package workflows
// holds the deterministic code and imports this). It imports nothing of the service's own.
package contract

import (
	"slices"
	"strconv"

	"go.temporal.io/sdk/temporal"
)

// DefaultTaskQueue is the task queue the worker polls unless configured otherwise.
const DefaultTaskQueue = "lockernet"

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

// SearchAttrs are a workflow's search attributes, one typed field per attribute: the one
// way they are built, whether the workflow is started from the outbox, by an apiserver or
// by a parent workflow. OrganizationId is always set; every other attribute only where it
// applies (a non-zero field).
type SearchAttrs struct {
	OrganizationID    int64
	LocationID        int64
	TowerID           string
	LockerID          int64
	RequestKind       string
	WebhookEndpointID string
	EventType         string
}

// Map is the attributes by name, as an outbox row stores them.
func (a SearchAttrs) Map() map[string]string {
	m := map[string]string{AttrOrganizationID.GetName(): strconv.FormatInt(a.OrganizationID, 10)}
	str := func(k temporal.SearchAttributeKeyKeyword, v string) {
		if v != "" {
			m[k.GetName()] = v
		}
	}
	id := func(k temporal.SearchAttributeKeyKeyword, v int64) {
		if v != 0 {
			m[k.GetName()] = strconv.FormatInt(v, 10)
		}
	}
	id(AttrLocationID, a.LocationID)
	str(AttrTowerID, a.TowerID)
	id(AttrLockerID, a.LockerID)
	str(AttrRequestKind, a.RequestKind)
	str(AttrWebhookEndpointID, a.WebhookEndpointID)
	str(AttrEventType, a.EventType)
	return m
}

// Typed is the attributes as a workflow start takes them.
func (a SearchAttrs) Typed() temporal.SearchAttributes { return KeywordAttributes(a.Map()) }

// KeywordAttributes turns attributes by name (an outbox row's) into a workflow start's, in
// name order, every one a keyword. The map's names are sorted before use, so the result does
// not depend on map order; workflowcheck flags any map iteration.
//
//workflowcheck:ignore
func KeywordAttributes(m map[string]string) temporal.SearchAttributes {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	updates := make([]temporal.SearchAttributeUpdate, 0, len(names))
	for _, k := range names {
		updates = append(updates, temporal.NewSearchAttributeKeyKeyword(k).ValueSet(m[k]))
	}
	return temporal.NewSearchAttributes(updates...)
}
