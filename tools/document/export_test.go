package document

// OnStart has b tell f each child's process id.
func OnStart(b *Box, f func(pid int)) { b.started = f }
