#!/usr/bin/env python3
"""Prints what a hung launcher never read from its children's stdout and stderr.

    scripts/unread_output.py PID

Open MPI 5.0.7's prterun sometimes hangs after ranks fail (scripts/mpirun-watch.sh); what the ranks wrote after
that stays in the pipes and ptys prterun reads them from, and is lost when prterun is killed. This takes a copy of
each of prterun's file descriptors that is the reading end of a pipe or a pty's master (pidfd_getfd(2): the same
open file, so nothing prterun would still read is skipped), reads what is buffered there without waiting, and
writes it to stdout, one descriptor after the other. Needs Linux 5.6 and the right to ptrace PID (root, or the
same user); says why on stderr and exits 1 otherwise.
"""
import ctypes
import errno
import os
import sys

SYS_PIDFD_GETFD = 438  # (syscalls added since Linux 5.1 have one number on x86_64, arm64 and the others alike)


def unread(pid: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        pidfd = os.pidfd_open(pid)
    except OSError as e:
        print(f"unread_output.py: pidfd_open({pid}): {e.strerror}", file=sys.stderr)
        return 1
    fds = sorted(int(fd) for fd in os.listdir(f"/proc/{pid}/fd"))
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                flags = int(next(line for line in info if line.startswith("flags:")).split()[1], 8)
        except (OSError, StopIteration):
            continue
        reading_pipe = target.startswith("pipe:") and flags & os.O_ACCMODE == os.O_RDONLY
        pty_master = target in ("/dev/ptmx", "/dev/pts/ptmx")
        if not (reading_pipe or pty_master):
            continue
        mine = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
        if mine < 0:
            err = ctypes.get_errno()
            print(f"unread_output.py: pidfd_getfd({pid}, {fd}): {os.strerror(err)}", file=sys.stderr)
            if err in (errno.ENOSYS, errno.EPERM):
                return 1
            continue
        # (O_NONBLOCK is a flag of the open file, which prterun shares: it is set back after reading.)
        was_blocking = os.get_blocking(mine)
        os.set_blocking(mine, False)
        try:
            while True:
                try:
                    data = os.read(mine, 65536)
                except (BlockingIOError, OSError):  # nothing more buffered; EIO: a pty whose other side is gone
                    break
                if not data:
                    break
                sys.stdout.buffer.write(data)
        finally:
            os.set_blocking(mine, was_blocking)
            os.close(mine)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        print("usage: scripts/unread_output.py PID", file=sys.stderr)
        sys.exit(2)
    sys.exit(unread(int(sys.argv[1])))
