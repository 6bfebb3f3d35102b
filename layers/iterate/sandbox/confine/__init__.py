"""The OS layers of a run, each meant to hold when the others are bypassed (see each module).

namespaces.py  network, mount, PID and IPC namespaces and the jail (where the OS allows them)
landlock.py    the read-only view of the interpreter without a jail; no writes, exec or TCP
seccomp.py     the syscall filter: every refused call, in one table per architecture
lockdown.py    limits, the run's uid, capabilities, then the above in order
kernel.py      libc and prctl numbers they share

Nothing here imports the engine (`iterate`): the sandbox's processes load these files as a package of
their own (worker.py).
"""
