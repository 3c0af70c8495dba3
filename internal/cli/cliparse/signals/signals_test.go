package signals

import (
	"context"
	"syscall"
	"testing"
	"time"
)

func TestHeldSignalsAreIgnoredUntilTheContextIsAsked(t *testing.T) {
	l := New(syscall.SIGHUP, syscall.SIGUSR1)
	l.Hold()
	// Held: ignored (the default action would end this test binary).
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	ctx := l.Context()
	done := ctx.Done() // registers them
	select {
	case <-done:
		t.Fatal("a held signal cancelled the context")
	default:
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a signal after the context was asked did not cancel it")
	}
	if ctx.Err() != context.Canceled {
		t.Errorf("Err = %v, want context.Canceled", ctx.Err())
	}
	l.Hold() // once registered, holding changes nothing
}

func TestErrRegistersTheSignals(t *testing.T) {
	l := New(syscall.SIGUSR2)
	ctx := l.Context()
	if ctx.Err() != nil {
		t.Fatal("cancelled before any signal")
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	<-wctx.Done()
	if ctx.Err() != context.Canceled {
		t.Errorf("Err = %v after the signal, want context.Canceled", ctx.Err())
	}
}
