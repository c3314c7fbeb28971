// go_stat: a Go program that stats its config from a named function in a loop: the
// finding's call site must be that function, not Go's runtime or syscall package
// (crates/dejavu/tests/findings.rs). With `close`, it also opens the file N times from
// another function that defers its Close: the compiler inlines (*os.File).Close into the
// deferred call's wrapper, and the close must be named there, not at os's line. Usage:
// go_stat FILE N [MS [close]]
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

//go:noinline
func probeConfig(path string) int64 {
	st, err := os.Stat(path) // STAT_LINE
	if err != nil {
		return -1
	}
	return st.Size()
}

//go:noinline
func openConfig(path string) int {
	f, err := os.Open(path) // OPEN_LINE
	if err != nil {
		return -1
	}
	defer f.Close() // CLOSE_LINE
	return 1
}

func main() {
	n, _ := strconv.Atoi(os.Args[2])
	var sum int64
	for i := 0; i < n; i++ {
		sum += probeConfig(os.Args[1])
	}
	if len(os.Args) > 4 && os.Args[4] == "close" {
		for i := 0; i < n; i++ {
			sum += int64(openConfig(os.Args[1]))
		}
	}
	fmt.Println("go_stat:", n, sum)
	if len(os.Args) > 3 {
		ms, _ := strconv.Atoi(os.Args[3])
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
}
