package workflows_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/temporal"

	"github.com/lockernet/lockernet/workflows/contract"
)

// Each kind of workflow carries the attributes operators search it by, under the names the
// namespace registers; an attribute that does not apply is absent.
func TestSearchAttrs(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		attrs contract.SearchAttrs
		want  map[string]string
	}{
		"a tower hold": {
			contract.SearchAttrs{OrganizationID: 7, LocationID: 4, TowerID: "0100000000000011", LockerID: 42, RequestKind: "reservation"},
			map[string]string{"OrganizationId": "7", "LocationId": "4", "TowerId": "0100000000000011", "LockerId": "42", "RequestKind": "reservation"},
		},
		"a gateway request": {
			contract.SearchAttrs{OrganizationID: 7, LocationID: 4, RequestKind: "gateway:GW-0002:door-open"},
			map[string]string{"OrganizationId": "7", "LocationId": "4", "RequestKind": "gateway:GW-0002:door-open"},
		},
		"a webhook delivery": {
			contract.SearchAttrs{OrganizationID: 7, WebhookEndpointID: "e1", EventType: "locker.released"},
			map[string]string{"OrganizationId": "7", "WebhookEndpointId": "e1", "EventType": "locker.released"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, tc.attrs.Map())
			typed := tc.attrs.Typed()
			assert.Equal(t, len(tc.want), typed.Size())
			for k, v := range tc.want {
				assert.Contains(t, contract.SearchAttributeNames, k)
				got, ok := typed.GetKeyword(temporal.NewSearchAttributeKeyKeyword(k))
				assert.True(t, ok, k)
				assert.Equal(t, v, got, k)
			}
		})
	}
}
