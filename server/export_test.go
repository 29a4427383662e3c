package server

// InFlight returns the calls the gate counts as in flight, and the open
// connections it admitted.
func (g *Gate) InFlight() (streams, conns int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.streams, g.conns
}
