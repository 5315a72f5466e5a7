"""nbgrader's course directory is this repository: solutions/ is the source, notebooks/ the release."""
import copy
import os

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader import utils
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import CsvExportPlugin
from nbgrader.preprocessors import (CheckCellMetadata, ClearHiddenTests, ClearOutput, DeduplicateIds, GetGrades,
                                    NbGraderPreprocessor, OverwriteCells, OverwriteKernelspec)

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
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, ShortTestTracebacks, CSSHTMLHeaderPreprocessor]

# nbgrader gives 0 to a test cell that writes to stderr: a library's warning must not cost points.
os.environ["PYTHONWARNINGS"] = "ignore"
c.Execute.timeout = 300
