package pool

// Quarantine says why a slot is out of rotation.
type Quarantine struct {
	// Reason is the operator's text, or what failed.
	Reason string `json:"reason"`
	// Output is the end of the last failure's output, when a failure
	// quarantined the slot.
	Output string `json:"output,omitempty"`
	// By is who quarantined it: an operator's owner, or the pool itself.
	By string `json:"by"`
	// At is when.
	At string `json:"at"`
	// Failures is how many failures in a row quarantined it (0 for an
	// operator's quarantine).
	Failures int `json:"failures,omitempty"`
}
