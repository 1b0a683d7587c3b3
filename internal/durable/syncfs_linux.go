package durable

import "golang.org/x/sys/unix"

// syncfs is syncfs(2): the file system of fd, whole.
func syncfs(fd int) error { return unix.Syncfs(fd) }
