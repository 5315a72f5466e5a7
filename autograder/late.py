"""Deadlines and the late penalty.

The deadlines are a CSV file with a header row `assignment,due` (and optionally `timezone`):

    assignment,due
    01-weights,2026-10-05T23:59:00-04:00
    02-global-attention,2026-10-12 23:59,America/New_York

`due` is an ISO 8601 date-time with its UTC offset (`-04:00`, `Z`), or without one and then with
a `timezone` (an IANA name such as `Europe/Paris`, daylight saving time included). An assignment
with no line has no deadline.

The rule (`Policy`): a notebook handed in after its deadline loses `percent_per_day` % of the
points it earned for each day or part of a day late (1 second late is 1 day), for at most
`max_days` days; later than that, it scores 0. With the defaults, 10 % and 5 days: 1 day late
keeps 90 %, 5 days 50 %, 5 days and 1 second 0. The grader's `score` is kept as earned; the
penalty is written beside it and applied in the exports.

The time a notebook was handed in comes from one of (`grade --submitted-at`):
`mtime` (the notebook file's modification time: keep it when collecting, `cp -p`, `unzip`),
`gradescope` (the `created_at` of a Gradescope `submission_metadata.json` beside the notebook),
or a CSV file with the columns `student,assignment,submitted_at` (ISO 8601 with offset)."""
import csv
import json
import math
import os
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


class LateError(ValueError):
    pass


DAY = timedelta(days=1)


@dataclass(frozen=True)
class Policy:
    percent_per_day: float = 10.0
    max_days: int = 5

    def __post_init__(self):
        if not 0 <= self.percent_per_day <= 100 or self.max_days < 0:
            raise LateError("the late penalty is a percentage per day between 0 and 100, and at least 0 days")

    def percent(self, days):
        """The penalty in percent of the earned points for `days` days late."""
        if days <= 0:
            return 0.0
        if days > self.max_days:
            return 100.0
        return min(100.0, self.percent_per_day * days)

    def describe(self):
        return (f"{self.percent_per_day:g}% of the points earned per day or part of a day late, for up to "
                f"{self.max_days} day{'s' * (self.max_days != 1)}; later, 0")


@dataclass(frozen=True)
class Late:
    """One notebook's lateness: when it was due and handed in, and what that costs."""
    due: datetime
    submitted: datetime
    days: int
    percent: float

    def apply(self, score):
        return round(score * (1 - self.percent / 100), 6)

    @classmethod
    def of(cls, due, submitted, policy):
        seconds = (submitted - due).total_seconds()
        days = math.ceil(seconds / DAY.total_seconds()) if seconds > 0 else 0
        return cls(due, submitted, days, policy.percent(days))


def parse_time(text, zone=None, where=""):
    """An aware datetime from ISO 8601; a naive one needs `zone` (an IANA name)."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise LateError(f"{where}{text!r} is not an ISO 8601 date-time (e.g. 2026-10-05T23:59:00-04:00)") from None
    if moment.tzinfo is None:
        if not zone:
            raise LateError(f"{where}{text!r} has no UTC offset: write one (2026-10-05T23:59:00-04:00) or a timezone column")
        try:
            moment = moment.replace(tzinfo=ZoneInfo(zone.strip()))
        except (ZoneInfoNotFoundError, ValueError):
            raise LateError(f"{where}unknown timezone {zone!r} (an IANA name, e.g. America/New_York)") from None
    return moment


def _rows(path, required, what):
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            header = [h.strip().lower() for h in reader.fieldnames or []]
            missing = [c for c in required if c not in header]
            if missing:
                raise LateError(f"{what} {path}: no column {', '.join(missing)} (its header: {','.join(required)})")
            reader.fieldnames = header
            return [(number, {k: (v or "").strip() for k, v in row.items() if k})
                    for number, row in enumerate(reader, start=2) if any((v or "").strip() for v in row.values())]
    except (OSError, UnicodeDecodeError) as error:
        raise LateError(f"{what} {path}: cannot be read ({error})") from None


def read_deadlines(path, known=None):
    """{assignment: aware datetime}. `known`: the course's assignments (another name is an error)."""
    deadlines = {}
    for number, row in _rows(path, ["assignment", "due"], "deadlines"):
        where = f"deadlines {path}, line {number}: "
        assignment = row["assignment"]
        if known is not None and assignment not in known:
            raise LateError(f"{where}{assignment!r} is not an assignment of this course ({', '.join(known)})")
        if assignment in deadlines:
            raise LateError(f"{where}{assignment} has two deadlines")
        deadlines[assignment] = parse_time(row["due"], row.get("timezone"), where)
    return deadlines


def read_times(path):
    """{(student, assignment): aware datetime} from a CSV student,assignment,submitted_at."""
    times = {}
    for number, row in _rows(path, ["student", "assignment", "submitted_at"], "submission times"):
        times[row["student"], row["assignment"]] = parse_time(row["submitted_at"], None,
                                                               f"submission times {path}, line {number}: ")
    return times


def gradescope_time(notebook_path):
    """`created_at` of the Gradescope submission_metadata.json beside the notebook, or None."""
    path = os.path.join(os.path.dirname(notebook_path), "submission_metadata.json")
    try:
        with open(path, encoding="utf-8") as f:
            return parse_time(str(json.load(f)["created_at"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def mtime(notebook_path):
    try:
        return datetime.fromtimestamp(os.stat(notebook_path).st_mtime, timezone.utc)
    except OSError:
        return None


def lateness(jobs, deadlines, policy, source="mtime"):
    """({(student, assignment): Late} for each graded notebook of an assignment with a deadline,
    [warnings]). `jobs`: (student, assignment, notebook path; "" when nothing was handed in).
    `source`: "mtime", "gradescope" or the path of a CSV of times."""
    given = read_times(source) if source not in ("mtime", "gradescope") else None
    found, warnings = {}, []
    for student, assignment, path in jobs:
        if assignment not in deadlines or not path:
            continue  # no deadline, or nothing handed in (it scores 0 already)
        if given is not None:
            submitted = given.get((student, assignment))
        elif not os.path.lexists(path):
            continue  # no notebook where it was looked for: it scores 0 already, and its feedback says why
        else:
            submitted = gradescope_time(path) if source == "gradescope" else mtime(path)
        if submitted is None:
            warnings.append(f"{student}/{assignment}: no late penalty applied: {_no_time(source, path, student, assignment)}")
            continue
        found[student, assignment] = Late.of(deadlines[assignment], submitted, policy)
    return found, warnings


def _no_time(source, path, student, assignment):
    """What is actually missing when a graded notebook has no hand-in time."""
    if source == "gradescope":
        beside = os.path.join(os.path.dirname(path), "submission_metadata.json")
        if not os.path.exists(beside):
            return f"no submission_metadata.json beside {os.path.basename(path)} (Gradescope's export puts one there)"
        return f"{beside} has no readable created_at"
    if source == "mtime":
        return f"the modification time of {path} cannot be read"
    return f"no line {student},{assignment} in {source}"


def when(moment, zone=None):
    """A date-time as a reader wants it, in `zone` (default: its own), the zone named:
    2026-10-05 23:59 EDT, 2026-10-05 23:59 UTC-04:00, 2026-10-06 03:59 UTC."""
    moment = moment.astimezone(zone) if zone is not None else moment
    name = moment.tzname() or moment.strftime("UTC%z")
    return f"{moment:%Y-%m-%d %H:%M} {name}"


def sentence(late, score, max_score, shown=str):
    """The feedback's line about a notebook's deadline: the hand-in time said in the deadline's zone
    (a file's modification time and Gradescope's times are in UTC, a deadline in the course's)."""
    zone = late.due.tzinfo
    handed, due = when(late.submitted, zone), when(late.due)
    if late.days == 0:
        return f"Handed in {handed}, before the deadline ({due})."
    return (f"Handed in {handed}, {late.days} day{'s' * (late.days != 1)} after the deadline "
            f"({due}; a part of a day counts as a day): late penalty {shown(late.percent)}% of the points "
            f"earned, {shown(score)} → {shown(late.apply(score))} of {shown(max_score)}.")
