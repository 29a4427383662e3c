package memstore

// bytes is the memory of the stored entries, states and settlement
// records, as the store accounts it (entryBytes), including expired
// entries not yet removed.
func (s *Store) bytes() int64 {
	var total int64
	s.eachShard(func(sh *shard) { total += sh.bytes + sh.recBytes })
	return total
}

// Bytes exposes bytes to the external tests.
func (s *Store) Bytes() int64 { return s.bytes() }

// Len returns the keys d holds.
func (d *Demand) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.keys)
}
