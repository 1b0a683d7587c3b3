package lifecycle

import (
	"context"

	"github.com/paddock-dev/paddock"
)

// AfterVerify is what a verify that ended with res does for run id's
// approval policy: a test plays the verify by recording its event.
func AfterVerify(ctx context.Context, m *Manager, id string, res *paddock.VerifyResult) {
	m.Policies.afterVerify(ctx, id, res)
}
