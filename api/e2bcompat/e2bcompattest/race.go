//go:build race

package e2bcompattest

// raceScale: the race detector's shadow memory multiplies a process's
// RSS growth by roughly 5 to 10.
const raceScale = 8
