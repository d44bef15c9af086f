"""The table of disagreements: for every route, the honest items it judged otherwise than the plain reference,
and the hacks it passed. The reference's own row checks the corpus: an honest item the reference judges
against its label is a corpus bug, and a hack the reference passes is a trick a plain harness falls for.

:func:`by_family` splits each row by the family its items stand for (:func:`family`), so that the table says
which of issue 31's families a route still gets wrong, and how many items of each it judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .corpus import Item
from .reference import Outcome
from .route_http import Verdict

SHOWN = 4  # item ids shown per cell

COLUMNS = ("honest: right judged wrong", "honest: wrong judged right", "hack passed", "not judged (SE)")


@dataclass
class Row:
    """One route's disagreements, each cell a list of item ids."""

    route: str
    judged: int = 0
    cells: dict[str, list[str]] = field(default_factory=lambda: {c: [] for c in COLUMNS})

    @property
    def disagreements(self) -> int:
        return sum(len(v) for v in self.cells.values())


# The families of issue 31 that earlier rounds' items already stand for, by variant (the rest: earlier rounds).
_VARIANT_FAMILIES = {"names_answered": "1", "by_path": "5", "stdin_by_path": "5", "stdout_by_path": "5"}
_VARIANT_FAMILIES["descriptor_zero"] = "5"


def family(item: Item) -> str:
    """The family an item stands for: issue 31's number (1-9), ``model`` (real completions), ``generative``, or
    ``earlier`` (the corpus of earlier rounds)."""
    if item.family:
        return item.family
    if item.bound:
        return "4/7/8"  # comparisons.py: how numbers and outputs compare, by each dataset's rule
    return _VARIANT_FAMILIES.get(item.variant, "earlier")


def route_row(route: str, items: list[Item], reference: dict[str, Outcome], verdicts: dict[str, Verdict]) -> Row:
    """How ``route``'s verdicts differ from the truth (the reference for honest items, "fails" for hacks)."""
    row = Row(route)
    for item in items:
        if item.id not in verdicts:
            continue  # the route cannot express this item
        row.judged += 1
        got = verdicts[item.id]
        if got is None:
            row.cells["not judged (SE)"].append(item.id)
        elif item.label == "hack":
            if got:
                row.cells["hack passed"].append(item.id)
        elif got != reference[item.id].passed:
            row.cells["honest: right judged wrong" if not got else "honest: wrong judged right"].append(item.id)
    return row


def reference_row(items: list[Item], reference: dict[str, Outcome]) -> Row:
    """The reference against the corpus's labels."""
    row = Row("reference vs labels")
    for item in items:
        row.judged += 1
        if item.label == "model":
            continue  # the reference is its truth
        passed = reference[item.id].passed
        if item.label == "honest-correct" and not passed:
            row.cells["honest: right judged wrong"].append(item.id)
        elif item.label == "honest-wrong" and passed:
            row.cells["honest: wrong judged right"].append(item.id)
        elif item.label == "hack" and passed:
            row.cells["hack passed"].append(item.id)
    return row


def _cell(ids: list[str]) -> str:
    if not ids:
        return "0"
    more = f", +{len(ids) - SHOWN}" if len(ids) > SHOWN else ""
    return f"**{len(ids)}**: " + ", ".join(f"`{i}`" for i in ids[:SHOWN]) + more


def markdown(rows: list[Row]) -> str:
    """The rows as a markdown table."""
    lines = ["| route | judged | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---|" * len(COLUMNS)]
    for row in rows:
        lines.append(f"| {row.route} | {row.judged} | " + " | ".join(_cell(row.cells[c]) for c in COLUMNS) + " |")
    return "\n".join(lines)


def families(rows: list[Row]) -> dict[tuple[str, str], list[str]]:
    """Disagreeing items grouped by route and cell, each id without its task (``form/[language/]variant``), so
    that one cause shows once with the number of tasks it hit: ``{(route, cell): ["call/main_demo x20", ...]}``."""
    out: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        for cell, ids in row.cells.items():
            kinds: dict[str, int] = {}
            for i in ids:
                kind = i.split("/", 1)[1]
                kinds[kind] = kinds.get(kind, 0) + 1
            if kinds:
                out[(row.route, cell)] = [f"{k} x{n}" for k, n in sorted(kinds.items())]
    return out


def by_family(rows: list[Row], items: list[Item], verdicts: dict[str, dict[str, Verdict]]) -> str:
    """A markdown table of ``rows`` (the reference's first, then the routes' in ``verdicts``) split by family:
    per route and family, the items judged and the count in each column."""
    of = {i.id: family(i) for i in items}
    names = sorted(set(of.values()), key=lambda f: (not f[0].isdigit(), f))
    lines = ["| route | family | judged | " + " | ".join(COLUMNS) + " |", "|---|---|---|" + "---|" * len(COLUMNS)]
    for row in rows:
        judged = verdicts.get(row.route, {i.id: None for i in items})
        for name in names:
            n = sum(1 for i in items if of[i.id] == name and i.id in judged)
            if n:
                counts = [sum(1 for i in row.cells[c] if of[i] == name) for c in COLUMNS]
                lines.append(f"| {row.route} | {name} | {n} | " + " | ".join(map(str, counts)) + " |")
    return "\n".join(lines)
