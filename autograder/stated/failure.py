"""How a rule or a check says that the student's code gave a wrong answer."""


class CheckFailure(AssertionError):
    """The student's code gave a wrong answer; the message says on which input and how."""
