"""The approvals API is exactly what ``tether.approvals.__all__`` lists; changing it is deliberate.

Everything else in the package lives in private modules (``tether.approvals._flow``,
``_decide``, ...) that may change without notice, so nothing outside the package
imports from them: the rest of tether, the tests, the examples and the docs all
go through ``tether.approvals``.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import tether
import tether.approvals

EXPECTED = [
    "APPROVAL_KIND",
    "DECISION_KIND",
    "AlreadyDecidedError",
    "Alternative",
    "ApprovalConfigError",
    "ApprovalError",
    "ApprovalExpiredError",
    "ApprovalGatedTool",
    "ApprovalMismatchError",
    "ApprovalNotPendingError",
    "ApprovalOutcome",
    "ApprovalRequest",
    "ApprovalView",
    "ApproverNotAllowedError",
    "Approvers",
    "ArgsHashMismatchError",
    "Decider",
    "DecisionPayload",
    "DecisionResult",
    "Escalate",
    "ExpiryAction",
    "ExpiryPolicy",
    "GraphResumer",
    "InvalidEditError",
    "Resumer",
    "SafeAlternative",
    "Stop",
    "SyncResumer",
    "UnknownApprovalError",
    "approval_fields",
    "arequest_approval",
    "args_sha256",
    "build_decision",
    "cancel_pending",
    "cancel_pending_sync",
    "canonical_json",
    "copy_settled",
    "decide",
    "decide_as",
    "decide_as_sync",
    "decide_sync",
    "escape_json",
    "escape_text",
    "expire_due",
    "expire_due_sync",
    "expiry_policy",
    "format_approval",
    "format_approval_line",
    "get_approval",
    "get_approval_sync",
    "list_approvals",
    "list_approvals_sync",
    "policy_from_dict",
    "register_args_schema",
    "request_approval",
    "requires_approval",
    "resume_decided",
    "resume_decided_sync",
    "settle",
    "settle_sync",
    "stopped_by_expiry",
]

# Modules of the package a caller may still name: the errors (like ``tether.errors``),
# and the hashing module, which is due to move to a shared canonical-JSON module.
PUBLIC_MODULES = {"tether.approvals.errors", "tether.approvals.hashing"}
ROOT = Path(tether.__file__).resolve().parent.parent
PACKAGE = ROOT / "tether" / "approvals"


def _isort_key(name: str) -> tuple[int, str]:
    """Ruff's RUF022 order: CONSTANTS, then Classes, then everything else."""
    if name.isupper():
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)


def test_all_is_locked() -> None:
    assert tether.approvals.__all__ == EXPECTED


def test_all_is_sorted() -> None:
    names = list(tether.approvals.__all__)
    assert names == sorted(names, key=_isort_key)
    assert len(set(names)) == len(names)


def test_every_listed_name_is_importable() -> None:
    for name in tether.approvals.__all__:
        assert getattr(tether.approvals, name) is not None, name


def test_no_private_leaks() -> None:
    # Submodules appear as attributes once imported; everything else must be listed.
    public = {
        n
        for n in dir(tether.approvals)
        if not n.startswith("_") and not inspect.ismodule(getattr(tether.approvals, n))
    }
    assert public - set(tether.approvals.__all__) == set()


def test_internal_modules_are_private() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    public = {f"tether.approvals.{m}" for m in modules if not m.startswith("_")}
    assert public == PUBLIC_MODULES


def _python_files() -> list[Path]:
    found = []
    for top in ("tether", "tests", "examples", "bench", "scripts"):
        found += [p for p in (ROOT / top).rglob("*.py") if PACKAGE not in p.parents]
    return found


def _refused_imports(path: Path) -> list[str]:
    refused = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "tether.approvals":
            refused += [a.name for a in node.names if a.name not in tether.approvals.__all__]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("tether.approvals.") and node.module not in PUBLIC_MODULES:
                refused.append(node.module)
        elif isinstance(node, ast.Import):
            refused += [
                a.name
                for a in node.names
                if a.name.startswith("tether.approvals.") and a.name not in PUBLIC_MODULES
            ]
    return refused


def test_nothing_outside_the_package_imports_its_internals() -> None:
    files = _python_files()
    assert len(files) > 50  # the scan found the tree
    refused = {str(p.relative_to(ROOT)): names for p in files if (names := _refused_imports(p))}
    assert refused == {}


def test_the_docs_name_only_public_approvals() -> None:
    # CHANGELOG.md is history: it names the modules as they were.
    docs = [ROOT / "README.md", ROOT / "examples" / "README.md", *(ROOT / "docs").glob("*.md")]
    named = {
        f"{doc.name}: tether.approvals.{name}"
        for doc in docs
        for name in re.findall(r"tether\.approvals\.(\w+)", doc.read_text(encoding="utf-8"))
        if name not in tether.approvals.__all__ and f"tether.approvals.{name}" not in PUBLIC_MODULES
    }
    assert named == set()
