//go:build linux

package control

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peerUID is the effective uid of the process at the other end of conn as
// the kernel recorded it when that process connected or listened
// (SO_PEERCRED): the peer cannot forge it.
func peerUID(conn net.Conn) (uid int, known bool, err error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return 0, false, fmt.Errorf("not a Unix socket connection (%T)", conn)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, false, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, false, err
	}
	if credErr != nil {
		return 0, false, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return int(cred.Uid), true, nil
}
