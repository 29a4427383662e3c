package breaker

// Open reports whether the circuit is open (the store is known down).
func (b *Breaker) Open() bool { return b.open.Load() }
