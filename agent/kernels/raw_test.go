package kernels

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The raw calls answer as their unix counterparts do, and never wait.
func TestRawCallsOnAPipe(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ep)
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, p[0], &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(p[0])}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	fds := []unix.PollFd{{Fd: int32(p[0]), Events: unix.POLLIN}}
	var evs [2]unix.EpollEvent

	// Empty: nothing ready, a read would block.
	if n, err := rawPollNow(fds); n != 0 || err != nil {
		t.Errorf("poll of an empty pipe = %d, %v", n, err)
	}
	if n, err := rawEpollNow(ep, evs[:]); n != 0 || err != nil {
		t.Errorf("epoll of an empty pipe = %d, %v", n, err)
	}
	if n, err := rawRead(p[0], buf); n != -1 || err != unix.EAGAIN {
		t.Errorf("read of an empty pipe = %d, %v; want -1, EAGAIN", n, err)
	}

	if _, err := unix.Write(p[1], []byte("2\n")); err != nil {
		t.Fatal(err)
	}
	if n, err := rawPollNow(fds); n != 1 || err != nil || fds[0].Revents&unix.POLLIN == 0 {
		t.Errorf("poll of a ready pipe = %d, %v, revents %#x", n, err, fds[0].Revents)
	}
	if n, err := rawEpollNow(ep, evs[:]); n != 1 || err != nil || evs[0].Fd != int32(p[0]) {
		t.Errorf("epoll of a ready pipe = %d, %v, %+v", n, err, evs[0])
	}
	if n, err := rawRead(p[0], buf); n != 2 || err != nil || string(buf[:n]) != "2\n" {
		t.Errorf("read = %d, %v, %q", n, err, buf[:max(n, 0)])
	}
	if n, err := rawRead(p[0], nil); n != 0 || err != nil {
		t.Errorf("empty read = %d, %v", n, err)
	}

	// Closed write end: EOF.
	unix.Close(p[1])
	p[1] = -1
	if n, err := rawRead(p[0], buf); n != 0 || err != nil {
		t.Errorf("read at EOF = %d, %v", n, err)
	}
	if n, err := rawRead(-1, buf); n != -1 || err != unix.EBADF {
		t.Errorf("read of a bad fd = %d, %v", n, err)
	}
}
