import sys

from . import CourseError
from .cli import main

try:
    status = main()
except CourseError as error:  # the course itself lacks a file (a chapter being added): say which, no traceback
    print(f"python -m autograder: error: {error}", file=sys.stderr)
    status = 2
raise SystemExit(status)
