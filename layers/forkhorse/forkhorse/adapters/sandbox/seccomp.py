"""A small seccomp filter for the quick-check child, as a raw classic-BPF program.

bubblewrap loads it with `--seccomp FD`; the Lambda child's harness installs it with prctl.
It refuses what a quick check never needs and what would escape the sandbox's accounting:
creating processes (threads stay allowed), network sockets (only AF_UNIX pairs remain, which
asyncio uses internally), ptrace and cross-process memory access, namespaces, mounts,
io_uring, bpf, userfaultfd, perf events and the kernel keyring.
"""

import platform
import struct
from dataclasses import dataclass

_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_JSET_K = 0x45
_BPF_RET_K = 0x06

_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_EPERM = 1
_ENOSYS = 38

_OFFSET_NR = 0
_OFFSET_ARCH = 4
_OFFSET_ARG0_LOW = 16  # seccomp_data.args[0], low 32 bits on little-endian machines

_CLONE_THREAD = 0x00010000
_AF_UNIX = 1
_X32_SYSCALL_BIT = 0x40000000


@dataclass(frozen=True)
class _Arch:
    audit_arch: int
    denied: tuple[int, ...]
    clone: int
    clone3: int
    socket: int
    x32_bit: bool


# Syscall numbers from the kernel's unistd tables (x86_64: syscall_64.tbl; aarch64: generic).
_ARCHES = {
    "x86_64": _Arch(
        audit_arch=0xC000003E,
        # fork vfork ptrace process_vm_readv/writev unshare setns mount umount2 pivot_root
        # bpf userfaultfd perf_event_open add_key request_key keyctl io_uring_* kexec_load
        denied=(
            *(57, 58, 101, 310, 311, 272, 308, 165, 166, 155, 321, 323, 298, 248, 249, 250),
            *(425, 426, 427, 246),
        ),
        clone=56,
        clone3=435,
        socket=41,
        x32_bit=True,
    ),
    "aarch64": _Arch(
        audit_arch=0xC00000B7,
        # ptrace process_vm_readv/writev unshare setns mount umount2 pivot_root bpf
        # userfaultfd perf_event_open add_key request_key keyctl io_uring_* kexec_load
        denied=(
            *(117, 270, 271, 97, 268, 40, 39, 41, 280, 282, 241, 217, 218, 219),
            *(425, 426, 427, 104),
        ),
        clone=220,
        clone3=435,
        socket=198,
        x32_bit=False,
    ),
}


class UnsupportedArchitecture(RuntimeError):
    """The seccomp filter knows the system call numbers of x86_64 and aarch64 only."""


def _stmt(code: int, k: int) -> tuple[int, int, int, int]:
    return (code, 0, 0, k)


def _jump(code: int, k: int, if_true: int, if_false: int) -> tuple[int, int, int, int]:
    return (code, if_true, if_false, k)


def _errno(number: int) -> tuple[int, int, int, int]:
    return _stmt(_BPF_RET_K, _RET_ERRNO | number)


def filter_program(machine: str | None = None) -> bytes:
    """The compiled filter (an array of `struct sock_filter`) for this machine."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        raise UnsupportedArchitecture(f"No quick-check seccomp filter for {machine!r}.")
    program = [
        _stmt(_BPF_LD_W_ABS, _OFFSET_ARCH),
        _jump(_BPF_JEQ_K, arch.audit_arch, 1, 0),
        _stmt(_BPF_RET_K, _RET_KILL_PROCESS),
        _stmt(_BPF_LD_W_ABS, _OFFSET_NR),
    ]
    if arch.x32_bit:
        program += [
            _jump(_BPF_JGE_K, _X32_SYSCALL_BIT, 0, 1),
            _stmt(_BPF_RET_K, _RET_KILL_PROCESS),
        ]
    for number in arch.denied:
        program += [_jump(_BPF_JEQ_K, number, 0, 1), _errno(_EPERM)]
    # clone3 hides its flags in memory; ENOSYS makes libc fall back to clone for threads.
    program += [_jump(_BPF_JEQ_K, arch.clone3, 0, 1), _errno(_ENOSYS)]
    program += [
        _jump(_BPF_JEQ_K, arch.clone, 0, 3),
        _stmt(_BPF_LD_W_ABS, _OFFSET_ARG0_LOW),
        _jump(_BPF_JSET_K, _CLONE_THREAD, 5, 0),
        _errno(_EPERM),
        _jump(_BPF_JEQ_K, arch.socket, 0, 3),
        _stmt(_BPF_LD_W_ABS, _OFFSET_ARG0_LOW),
        _jump(_BPF_JEQ_K, _AF_UNIX, 1, 0),
        _errno(_EPERM),
        _stmt(_BPF_RET_K, _RET_ALLOW),
    ]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in program)
