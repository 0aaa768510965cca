package testenv

// DrainAPIServer tells the env's apiserver that it is stopping (what cmd/apiserver does on
// SIGTERM): requests waiting for a gateway answer at once.
func (e *Env) DrainAPIServer() { e.server.Drain() }
