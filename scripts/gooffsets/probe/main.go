// probe: a small Go program for scripts/gooffsets to read the runtime's
// layout from. It is built with DWARF by each toolchain; it links what the
// goroutine reader cares about: runtime/pprof's labels (pprof.Do), the
// memory profile (MemProfile), goroutines blocked on a channel, a mutex and
// a sleep. Run, it prints "ready <pid>" and waits for SIGTERM.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"
)

var sink [][]byte

func main() {
	runtime.MemProfileRate = 1
	for i := 0; i < 100; i++ {
		sink = append(sink, make([]byte, 1024))
	}
	block := make(chan struct{})
	var mu sync.Mutex
	mu.Lock()
	pprof.Do(context.Background(), pprof.Labels("probe", "chan"), func(context.Context) {
		go func() { <-block }()
	})
	go func() { mu.Lock() }()
	go func() { time.Sleep(time.Hour) }()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	fmt.Printf("ready %d\n", os.Getpid())
	<-stop
	n, _ := runtime.MemProfile(nil, true)
	fmt.Printf("goroutines %d, memory profile records %d\n", runtime.NumGoroutine(), n)
}
