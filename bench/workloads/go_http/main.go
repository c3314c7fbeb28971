// go_http: a Go HTTP server whose handler stats a file, and N requests to it from 16
// client goroutines, each request on a new connection (so each is served by a new
// goroutine, on a stack of its own): for bench/overhead.py's go_http workload.
//
// usage: go_http N FILE
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
)

func main() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: go_http N FILE")
		os.Exit(2)
	}
	file := os.Args[2]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if st, err := os.Stat(file); err == nil {
			fmt.Fprint(w, st.Size())
		}
	})}
	go srv.Serve(ln)
	url := "http://" + ln.Addr().String() + "/"
	const clients = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			for i := c; i < n; i += clients {
				resp, err := cl.Get(url)
				if err != nil {
					continue
				}
				resp.Body.Close()
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	srv.Close()
	fmt.Printf("go_http: %d requests, %d answered\n", n, ok)
}
