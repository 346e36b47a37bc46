//go:build !race

package document

// raceHeadroom is zero outside -race builds: the cap is the file's bound.
const raceHeadroom = 0
