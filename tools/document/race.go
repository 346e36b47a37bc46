//go:build race

package document

// raceHeadroom is address space the race detector maps for itself as the
// child runs (its trace parts grow with every goroutine): in a -race build
// the child's cap leaves it that much beyond the file's bound, so the
// detector does not die before the file is read. The heap watch still
// holds the file to its bound.
const raceHeadroom = 512 << 20
