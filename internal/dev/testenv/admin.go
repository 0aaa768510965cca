package testenv

import "testing"

// SetAdminEnv points the settings the operator tool (lockernet-admin) reads from the
// environment at this env: its database, a private data dir, its Temporal namespace and task
// queue. Outbox items the tool writes are dispatched by this env's apiserver, as in
// production. The master key is not exported (the env keeps it in its keyring only), so
// commands that open sealed secrets are out of reach; t.Setenv also rules out t.Parallel.
func (e *Env) SetAdminEnv(t *testing.T) {
	t.Helper()
	t.Setenv("DATABASE_URL", e.Store.Pool().Config().ConnString())
	t.Setenv("LOCKERNET_DATA_DIR", t.TempDir())
	t.Setenv("TEMPORAL_NAMESPACE", e.Namespace)
	t.Setenv("LOCKERNET_TASK_QUEUE", e.TaskQueue)
	t.Setenv("LOCKERNET_LOG_FORMAT", "text")
	t.Setenv("LOCKERNET_LOG_LEVEL", "warn")
}
