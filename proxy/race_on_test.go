//go:build race

package proxy_test

// raceEnabled: the race detector slows every memory access, so a timing
// measurement under it measures the detector.
const raceEnabled = true
