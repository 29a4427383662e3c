package algorithms

// DebtOf exposes debtOf to the external tests.
var DebtOf = debtOf

// MaxWait exposes maxWait, the longest wait a limit can produce, to the
// external tests.
const MaxWait = maxWait

// Reset exposes Undo.reset to the external tests.
func (u *Undo) Reset() { u.reset() }

// EmptySlot exposes emptySlot, a log's empty slot, to the external tests.
const EmptySlot = emptySlot
