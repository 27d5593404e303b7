//go:build !unix

package scrypt

// mapWords: ordinary heap memory where anonymous mappings are not offered.
func mapWords(n int) ([]uint32, func()) { return make([]uint32, n), nil }
