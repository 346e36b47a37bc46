package code

// ReadyPIDs are the process ids of the children started ahead and ready.
func (s *Sandbox) ReadyPIDs() []int { return s.pool().pids() }
