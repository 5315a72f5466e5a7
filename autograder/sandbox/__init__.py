"""Running a student's notebook in its own process, and talking to it on plain values only.

`worker` is the student's side; `session` the grader's, `isolation` how the walls are built. The
student's side imports nothing of the checks or the reference solutions: only `wire`, `calls`
and `procfs`.
"""
SANDBOX_HOME = "/sandbox"                        # the student's home in the sandbox
WRITABLE = (SANDBOX_HOME, "/tmp", "/dev/shm")    # its only writable places, in memory, emptied between students
