package client

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// rawDaemon listens on a unix socket in a test directory and answers
// every connection with serve, which gets the request's head as read: a
// daemon that is hostile or broken in ways a net/http server is not.
func rawDaemon(t *testing.T, serve func(conn net.Conn, head string)) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				var head strings.Builder
				for {
					line, err := br.ReadString('\n')
					head.WriteString(line)
					if err != nil || line == "\r\n" {
						break
					}
				}
				serve(conn, head.String())
			}()
		}
	}()
	return Unix(sock)
}

// TestBlockingConnSecondCloseSparesAReusedFd: a connection closed twice
// (its context's end and its body's Close both close it) must not shut
// down whatever socket the kernel gave the same descriptor number to in
// between: another request's connection.
func TestBlockingConnSecondCloseSparesAReusedFd(t *testing.T) {
	for try := 0; try < 10; try++ {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		syscall.Close(fds[1])
		conn := &blockingConn{f: os.NewFile(uintptr(fds[0]), "first")}
		conn.Close()
		other, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if other[0] != fds[0] {
			syscall.Close(other[0])
			syscall.Close(other[1])
			continue // the number went elsewhere: try again
		}
		conn.Close() // again, as AfterFunc and connCloser both do
		_, werr := syscall.Write(other[0], []byte("x"))
		syscall.Close(other[0])
		syscall.Close(other[1])
		if werr != nil {
			t.Fatalf("a second Close shut down the socket that reused descriptor %d: write: %v", fds[0], werr)
		}
		return
	}
	t.Skip("the kernel never reused the descriptor number")
}
