"""How a rule or a check says that the student's code gave a wrong answer, and the one place that
turns a rule's or a check's run into what the student reads."""
from ..sandbox.calls import StudentError


class CheckFailure(AssertionError):
    """The student's code gave a wrong answer; the message says on which input and how."""


def failure_of(run, *args):
    """"" if `run(*args)` holds, else what went wrong: the check's message, the student's error, or
    that the answer was too odd to compare (both graders and `check` say it the same way)."""
    try:
        run(*args)
        return ""
    except (CheckFailure, StudentError) as failure:
        return str(failure) or type(failure).__name__
    except Exception as error:  # an answer so odd that the comparison itself failed
        return f"could not check the answer ({type(error).__name__}: {error})"
