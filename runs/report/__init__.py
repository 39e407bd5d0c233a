"""The campaign report, one module per job.

- `runs.report.data`: the statistics (`ReportData`, `build_report_data`, `ArmRow`).
- `runs.report.repeated`: repeated elicitation (average over passes, then solve).
- `runs.report.summary`: `summary.json` (schema `dutchbook.report/1`, documented there).
- `runs.report.tables`: terminal leaderboard, `leaderboard.txt`, `report.md`, CSVs.
- `runs.report.wording`: the metric and the bootstrap's clusters named from the rows' arms.
- `runs.report.write`: `write_report`, which writes all of them (and the figures).
"""

from runs.report.data import SCHEMA, ArmRow, ReportData, build_report_data, build_rows
from runs.report.repeated import IncidenceFor, incidence_from_units, repeated_elicitation
from runs.report.write import write_report, write_report_folder, write_views

__all__ = [
    "SCHEMA",
    "ArmRow",
    "IncidenceFor",
    "ReportData",
    "build_report_data",
    "build_rows",
    "incidence_from_units",
    "repeated_elicitation",
    "write_report",
    "write_report_folder",
    "write_views",
]
