"""nbgrader's course directory is this repository: solutions/ is the source, notebooks/ the release."""
import copy
import os
import warnings

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader import utils
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.converters import Autograde
from nbgrader.plugins import CsvExportPlugin
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, ClearOutput, DeduplicateIds,
                                    GetGrades, IgnorePattern, LimitOutput, NbGraderPreprocessor, OverwriteCells,
                                    OverwriteKernelspec, SaveAutoGrades)
from sqlalchemy.exc import SAWarning

from autograder.nbgrader_feedback import FigureAltText, QuietClearHiddenTests, ShortTestTracebacks
from autograder.nbgrader_route import LatePenalty, TimedExecute, skip_unreadable

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


class RestoreHiddenTests(NbGraderPreprocessor):
    """Puts back the hidden tests of each locked cell that is exactly as released.

    `generate_assignment` records a cell's checksum in the gradebook *before* it removes the
    hidden tests (its SaveCells runs before ClearHiddenTests), and the released cell, without
    them, has another checksum; `autograde`'s OverwriteCells then compares the submitted cell
    with the gradebook's checksum, so every graded cell of every untouched notebook would be
    reported as changed ("Attribute 'checksum' for cell test_... has changed!", nbgrader issue
    #1961). A cell that is the released one, hidden tests removed exactly as nbgrader removes
    them, gets its source back from the gradebook here, so the comparison that follows holds;
    any other change to a locked cell is still reported, and undone, by OverwriteCells."""

    def preprocess(self, nb, resources):
        self.notebook_id = resources["nbgrader"]["notebook"]
        self.assignment_id = resources["nbgrader"]["assignment"]
        with Gradebook(resources["nbgrader"]["db_url"]) as self.gradebook:
            return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is None or not utils.is_locked(cell):
            return cell, resources
        try:
            source = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
        except MissingEntry:  # OverwriteCells reports it
            return cell, resources
        released = copy.deepcopy(cell)
        released.source = source.source
        if ClearHiddenTests(parent=self)._remove_hidden_test_region(released) and released.source == cell.source:
            cell.source = source.source
        return cell, resources


# nbgrader's own list (nbgrader/converters/autograde.py), RestoreHiddenTests before OverwriteCells
c.Autograde.sanitize_preprocessors = [ClearOutput, DeduplicateIds, OverwriteKernelspec, RestoreHiddenTests,
                                      OverwriteCells, CheckCellMetadata]


class ExportHandedIn(CsvExportPlugin):
    """nbgrader's CSV export, of the assignments someone handed in: `make release` records every
    chapter in the gradebook, and nbgrader's own export gives each student a 0 for every
    assignment it knows. `nbgrader export --assignment=[...]` still picks assignments."""

    def export(self, gradebook):
        if not self.assignment:
            self.assignment = [a.name for a in gradebook.assignments if a.submissions]
            if not self.assignment:  # nothing handed in: a header and no rows, not every assignment
                self.log.info("No assignment has been handed in")
                self.assignment = [""]
        super().export(gradebook)


c.ExportApp.plugin_class = ExportHandedIn

# Feedback shows each graded cell's report of its checks, never the hidden code.
# (figures get an alternative text; nbgrader's steps take nbconvert's display_data_priority: no warnings)
c.GenerateFeedback.preprocessors = [GetGrades, QuietClearHiddenTests, ShortTestTracebacks, FigureAltText,
                                    CSSHTMLHeaderPreprocessor]

# nbgrader gives 0 to a test cell that writes to stderr: a library's warning must not cost points.
os.environ["PYTHONWARNINGS"] = "ignore"
# nbgrader's Gradebook.add_submission builds a submission before adding it to its session, which
# SQLAlchemy 2 reports on every new submission ("SAWarning: Object of type <SubmittedAssignment>
# not in session"); the submission is added the line after: noise.
warnings.filterwarnings("ignore", r"Object of type <Submitted\w+> not in session", SAWarning)

# The autograder's time limits (autograder/sandbox/limits.py), per cell: a student's cell is stopped
# after 60 s, a graded cell (all of one exercise's checks, up to about 90 s for a training
# exercise on a slow machine) after 120 s, and the next cell runs; never a second try. An endless
# loop costs 60 s in each student's cell that runs it (120 s in a graded one), not 300 s three times.
# Change them with --TimedExecute.cell_seconds=N / --TimedExecute.test_cell_seconds=N.
# nbgrader's own list (nbgrader/converters/autograde.py), Execute replaced by TimedExecute.
c.Autograde.autograde_preprocessors = [TimedExecute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
                                       SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
c.Execute.execute_retries = 0

# The autograder's late rule (`grade --late-penalty 10 --late-max-days 5`): 10 % of the points earned
# per day or part of a day late, for up to 5 days; later, 0. The due date is nbgrader's
# (`nbgrader db assignment add <a> --duedate=...`), the time handed in the timestamp.txt that
# `python -m autograder nbgrader-prepare` writes (the notebook's modification time, as `grade`'s
# default `--submitted-at mtime`). Change the rule with --LatePenalty.percent_per_day / max_days.
c.AssignLatePenalties.plugin_class = LatePenalty

# A notebook that is not a notebook (truncated, not JSON) scores 0 with one line saying why,
# instead of a traceback and a failed run.
skip_unreadable(Autograde)
