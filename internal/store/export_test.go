package store

// WithDB returns a copy of s that runs its queries on db, so a test can see the SQL a
// method sends (e.g. to EXPLAIN it) without a second copy of the query text.
func WithDB(s *Store, db DBTX) *Store { return &Store{pool: s.pool, db: db, hooked: s.hooked} }

// Translate exposes translate to the tests.
func Translate(err error) error { return translate(err) }
