// go_exec: a Go program that runs a tool from a named function, once per event (or once
// in all: the clean twin). os/exec starts it with clone(CLONE_VM|CLONE_VFORK), whose
// wrapper keeps its return address in a register: the exec's call site must still be
// that function (crates/dejavu/tests/findings.rs). Usage: go_exec each|once N
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

//go:noinline
func toolVersion() int {
	out, err := exec.Command("true", "--version").Output() // EXEC_LINE
	if err != nil {
		return -1
	}
	return len(out)
}

func main() {
	n, _ := strconv.Atoi(os.Args[2])
	sum, kept := 0, -2
	for i := 0; i < n; i++ {
		if os.Args[1] == "each" || kept == -2 {
			kept = toolVersion()
		}
		sum += kept
	}
	fmt.Println("go_exec:", n, sum)
}
