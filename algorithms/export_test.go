package algorithms

// DebtOf exposes debtOf to the external tests.
var DebtOf = debtOf
