package algorithms

// DebtOf exposes debtOf to the external tests.
var DebtOf = debtOf

// MaxWait exposes maxWait, the longest wait a limit can produce, to the
// external tests.
const MaxWait = maxWait

// EmptySlot exposes emptySlot, a free slot of a log's ring, to the
// external tests.
const EmptySlot = emptySlot
