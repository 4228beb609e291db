//go:build !race

package e2bcompattest

const raceScale = 1
