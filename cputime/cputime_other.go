//go:build !unix

package cputime

func process() float64 { return -1 }
