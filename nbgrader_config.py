"""nbgrader's course directory is this repository: solutions/ is the source, notebooks/ the release."""
import os

from nbgrader.preprocessors import ClearHiddenTests, GetGrades
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor

from autograder.nbgrader_feedback import ShortTestTracebacks

c = get_config()  # noqa: F821 (provided by traitlets)

c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(c.CourseDirectory.root, "gradebook.db")
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__"]

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# Feedback shows each graded cell's report of its checks, never the hidden code.
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, ShortTestTracebacks, CSSHTMLHeaderPreprocessor]

# nbgrader gives 0 to a test cell that writes to stderr: a library's warning must not cost points.
os.environ["PYTHONWARNINGS"] = "ignore"
c.Execute.timeout = 300
