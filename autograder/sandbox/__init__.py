"""Running a student's notebook in its own process, and talking to it on plain values only.

`worker` is the student's side; `session` the grader's. The student's side imports nothing of
the checks or the reference solutions: only `wire` and `calls`.
"""
