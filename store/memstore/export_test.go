package memstore

// Bytes exposes bytes, the memory of the stored entries as the store
// accounts it, to the external tests.
func (s *Store) Bytes() int64 { return s.bytes() }
